{{/* The namespace of every object: namespace.name, else the release's. */}}
{{- define "netbench.namespace" -}}
{{- .Values.namespace.name | default .Release.Namespace -}}
{{- end -}}

{{- define "netbench.labels" -}}
app.kubernetes.io/name: netbench
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "netbench.image" -}}
{{- printf "%s:%s" .Values.image.repository (toString .Values.image.tag) -}}
{{- end -}}

{{/* The flags the values ask for, checked here: a run never gets a combination that cannot work. */}}
{{- define "netbench.check" -}}
{{- if and .Values.selection.skipTestedWithin (not .Values.remediate.label) -}}
{{- fail "selection.skipTestedWithin reads the nodes' netbench.io/last-run label, which only remediate.label writes: set remediate.label true, or skipTestedWithin \"\"" -}}
{{- end -}}
{{- if not (or (eq (toString .Values.gpus) "all") (eq (toString .Values.gpus) "env") (regexMatch "^[0-9]+$" (toString .Values.gpus))) -}}
{{- fail (printf "gpus %v: want all, a number, or env" .Values.gpus) -}}
{{- end -}}
{{- end -}}

{{/* "true" when the values set thresholds: a policy file is made and passed. */}}
{{- define "netbench.policy" -}}
{{- if or .Values.policy.thresholds .Values.policy.busbw -}}true{{- end -}}
{{- end -}}

{{/*
The coordinator's pod spec: netbench preflight over the opted-in nodes. "cron" adds
--k8s-skip-tested-within (a run now, the Job, tests every idle node).
*/}}
{{- define "netbench.podSpec" -}}
{{- $v := .root.Values -}}
serviceAccountName: netbench
restartPolicy: Never
affinity:
  nodeAffinity:
    requiredDuringSchedulingIgnoredDuringExecution:
      nodeSelectorTerms:
        - matchExpressions:
            - {key: {{ $v.nodes.label | quote }}, operator: DoesNotExist}
{{- with $v.coordinator.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $v.coordinator.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
containers:
  - name: netbench
    image: {{ include "netbench.image" .root | quote }}
    imagePullPolicy: {{ $v.image.pullPolicy }}
    env:
      - name: POD_IP
        valueFrom: {fieldRef: {fieldPath: status.podIP}}
    command: [netbench]
    args:
      - preflight
      - --launcher
      - k8s
      - --k8s-image
      - {{ include "netbench.image" .root | quote }}
      - --k8s-nodes
      - {{ printf "%s=%s" $v.nodes.label (toString $v.nodes.value) | quote }}
      - --advertise
      - $(POD_IP)
      - --budget
      - {{ $v.budget | quote }}
      {{- if ne (toString $v.gpus) "all" }}
      - --k8s-resource
      - {{ printf "nvidia.com/gpu=%v" $v.gpus | quote }}
      {{- end }}
      {{- range $v.extraResources }}
      - --k8s-resource
      - {{ . | quote }}
      {{- end }}
      {{- if $v.remediate.label }}
      - --k8s-label
      {{- end }}
      {{- if $v.remediate.taint }}
      - --k8s-taint
      {{- end }}
      {{- if $v.selection.idleOnly }}
      - --k8s-idle-only
      {{- end }}
      {{- if and .cron $v.selection.skipTestedWithin }}
      - --k8s-skip-tested-within
      - {{ $v.selection.skipTestedWithin | quote }}
      {{- end }}
      {{- if $v.metrics.configMap }}
      - --k8s-metrics-configmap
      - {{ $v.metrics.configMap | quote }}
      {{- end }}
      {{- if include "netbench.policy" .root }}
      - --policy
      - /etc/netbench/policy.toml
      {{- end }}
      - --out
      - /out/{id}
    resources:
      {{- toYaml $v.coordinator.resources | nindent 6 }}
    volumeMounts:
      - {name: out, mountPath: /out}
      {{- if include "netbench.policy" .root }}
      - {name: policy, mountPath: /etc/netbench, readOnly: true}
      {{- end }}
volumes:
  - name: out
    persistentVolumeClaim: {claimName: {{ $v.reports.claim.name | quote }}}
  {{- if include "netbench.policy" .root }}
  - name: policy
    configMap: {name: netbench-policy}
  {{- end }}
{{- end -}}
