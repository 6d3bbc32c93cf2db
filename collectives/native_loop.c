/* The native engine's timed loop: one C call per operation, as nccl-tests issues them.
 *
 * collectives/native_loop.py builds this file with the host's C compiler and says why it exists.
 * It needs no CUDA or NCCL header: the few NCCL signatures it calls are declared below (nccl.h;
 * ncclComm_t and cudaStream_t are pointers, ncclDataType_t and ncclRedOp_t are ints), and the
 * functions are the ones of the libnccl already in the process, handed in as pointers. */
#include <sched.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

enum {
  NB_SRC_DST_OP = 0, /* (send, recv, count, datatype, int, comm, stream): all_reduce, reduce_scatter,
                        broadcast (the int is the reduction or the root) */
  NB_SRC_DST = 1,    /* (send, recv, count, datatype, comm, stream): all_gather */
  NB_REDUCE = 2,     /* (send, recv, count, datatype, op, root, comm, stream): reduce */
  NB_PEER = 3,       /* (buffer, count, datatype, peer, comm, stream): send, recv */
  NB_GROUP = 4       /* (): group start, group end */
};

typedef struct {
  void *fn;
  int64_t kind;
  uint64_t a[8];
} nb_call;

typedef int (*src_dst_op_t)(const void *, void *, size_t, int, int, void *, void *);
typedef int (*src_dst_t)(const void *, void *, size_t, int, void *, void *);
typedef int (*reduce_t)(const void *, void *, size_t, int, int, int, void *, void *);
typedef int (*peer_t)(void *, size_t, int, int, void *, void *);
typedef int (*group_t)(void);

/* Makes calls[0..n) in order. Returns 0, or the first non-zero result (an ncclResult_t; -1 for an
 * unknown kind) with *at set to that call's index: the calls after it are not made. */
int nb_run(const nb_call *calls, int64_t n, int64_t *at) {
  for (int64_t i = 0; i < n; i++) {
    const nb_call *c = &calls[i];
    const uint64_t *a = c->a;
    int rc;
    switch (c->kind) {
    case NB_SRC_DST_OP:
      rc = ((src_dst_op_t)c->fn)((const void *)a[0], (void *)a[1], (size_t)a[2], (int)a[3], (int)a[4],
                                 (void *)a[5], (void *)a[6]);
      break;
    case NB_SRC_DST:
      rc = ((src_dst_t)c->fn)((const void *)a[0], (void *)a[1], (size_t)a[2], (int)a[3], (void *)a[4],
                              (void *)a[5]);
      break;
    case NB_REDUCE:
      rc = ((reduce_t)c->fn)((const void *)a[0], (void *)a[1], (size_t)a[2], (int)a[3], (int)a[4], (int)a[5],
                             (void *)a[6], (void *)a[7]);
      break;
    case NB_PEER:
      rc = ((peer_t)c->fn)((void *)a[0], (size_t)a[1], (int)a[2], (int)a[3], (void *)a[4], (void *)a[5]);
      break;
    case NB_GROUP:
      rc = ((group_t)c->fn)();
      break;
    default:
      rc = -1;
    }
    if (rc != 0) {
      *at = i;
      return rc;
    }
  }
  return 0;
}

typedef int (*query_t)(void *);

/* nb_run timed as nccl-tests times its loop: the clock from before the first call until the
 * stream is seen finished, polling query(stream) (the driver's cuStreamQuery: 0 done, not_ready
 * while work is left; another thread may run between polls, as nccl-tests' sched_yield lets it).
 * *us: the microseconds. Returns 0, a call's non-zero result (*at its index, the rest not made,
 * the stream not waited for) or the query's (*at = -1). */
int nb_timed(const nb_call *calls, int64_t n, int64_t *at, void *query, void *stream, int not_ready,
             double *us) {
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  int rc = nb_run(calls, n, at);
  while (rc == 0) {
    int q = ((query_t)query)(stream);
    if (q == 0)
      break;
    if (q != not_ready) {
      *at = -1;
      rc = q;
      break;
    }
    sched_yield();
  }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  *us = (double)(t1.tv_sec - t0.tv_sec) * 1e6 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e3;
  return rc;
}
