{{/* The three binaries: values key -> name and HTTP port (/metrics, /readyz). */}}
{{- define "etcd-operator.binaries" -}}
cluster: {name: etcd-operator, port: 8080}
backup: {name: etcd-backup-operator, port: 8081}
restore: {name: etcd-restore-operator, port: 8082}
{{- end }}

{{- define "etcd-operator.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: etcd-operator
{{- end }}

{{/* Selector labels of one operator's pods; dict "root" . "name" binary. */}}
{{- define "etcd-operator.selector" -}}
app.kubernetes.io/name: {{ .name }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
{{- end }}

{{- define "etcd-operator.rbacName" -}}
{{ .Release.Name }}-etcd-operator
{{- end }}

{{- define "etcd-operator.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end }}

{{- define "etcd-operator.checkValues" -}}
{{- if not (has .Values.scope (list "namespace" "cluster")) }}
{{- fail (printf "scope must be namespace or cluster, not %q" .Values.scope) }}
{{- end }}
{{- if not (has .Values.logFormat (list "text" "json")) }}
{{- fail (printf "logFormat must be text or json, not %q" .Values.logFormat) }}
{{- end }}
{{- end }}
