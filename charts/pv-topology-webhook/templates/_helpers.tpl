{{- define "pvtw.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "pvtw.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else if contains (include "pvtw.name" .) .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name (include "pvtw.name" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* The namespace of every object: namespace.name, else the release's. */}}
{{- define "pvtw.namespace" -}}
{{- default .Release.Namespace .Values.namespace.name -}}
{{- end -}}

{{- define "pvtw.selectorLabels" -}}
app.kubernetes.io/name: {{ include "pvtw.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "pvtw.labels" -}}
{{ include "pvtw.selectorLabels" . }}
app.kubernetes.io/part-of: pv-topology-webhook
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{- define "pvtw.tlsSecret" -}}
{{- default (printf "%s-tls" (include "pvtw.fullname" .)) .Values.certificates.secretName -}}
{{- end -}}

{{- define "pvtw.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}
{{- end -}}

{{- define "pvtw.priorityClassName" -}}
{{- if .Values.priorityClass.create -}}
{{- default (include "pvtw.fullname" .) .Values.priorityClass.name -}}
{{- else -}}
{{- .Values.priorityClass.name -}}
{{- end -}}
{{- end -}}
