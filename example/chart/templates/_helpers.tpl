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

{{/*
The prefix of every name the release gives: the release name, followed by the
chart's name (or nameOverride) unless the release name already holds it;
fullnameOverride replaces it. Two releases never share it in one namespace, as
their names differ there. A name longer than 47 characters is cut to 38 and
given 8 characters of its hash, so that "-restore-metrics" still fits in a DNS
label and two long names that begin alike still differ.
*/}}
{{- define "etcd-operator.fullname" -}}
{{- $name := .Values.fullnameOverride }}
{{- if not $name }}
{{- $chart := .Values.nameOverride | default .Chart.Name }}
{{- $name = ternary .Release.Name (printf "%s-%s" .Release.Name $chart) (contains $chart .Release.Name) }}
{{- end }}
{{- if gt (len $name) 47 }}
{{- $name = printf "%s-%s" ($name | trunc 38 | trimSuffix "-") ($name | sha256sum | trunc 8) }}
{{- end }}
{{- $name }}
{{- end }}

{{/* The name of one operator's Deployment, ServiceAccount and Role; dict "root" . "key" key. */}}
{{- define "etcd-operator.componentName" -}}
{{ include "etcd-operator.fullname" .root }}-{{ .key }}
{{- end }}

{{/*
The name of a cluster-scoped object (ClusterRoles and their bindings): the
release's namespace is part of it, since two releases of one name may live in
two namespaces; dict "root" . "suffix" suffix.
*/}}
{{- define "etcd-operator.clusterName" -}}
{{ include "etcd-operator.fullname" .root }}-{{ .root.Release.Namespace }}-{{ .suffix }}
{{- end }}

{{/*
The labels of one operator's pods: its selector labels, which podLabels cannot
change, then the operator's podLabels, then the global ones; dict "root" .
"name" binary "op" operator values.
*/}}
{{- define "etcd-operator.podLabels" -}}
{{- $selector := include "etcd-operator.selector" . | fromYaml }}
{{- toYaml (merge $selector (.op.podLabels | default dict) (.root.Values.podLabels | default dict)) }}
{{- end }}

{{/* The annotations of one operator's pods, the operator's over the global ones. */}}
{{- define "etcd-operator.podAnnotations" -}}
{{- $a := merge (dict) (.op.podAnnotations | default dict) (.root.Values.podAnnotations | default dict) }}
{{- if $a }}
{{- toYaml $a }}
{{- end }}
{{- end }}

{{- define "etcd-operator.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end }}
