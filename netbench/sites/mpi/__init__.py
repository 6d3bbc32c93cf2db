"""The mpi site: its site, launcher, transport and checks together."""
