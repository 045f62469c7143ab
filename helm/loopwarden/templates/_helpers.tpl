{{/* Chart name, overridable. */}}
{{- define "loopwarden.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Full resource name: <release>-<name>, or the release name alone when it already contains the
chart name. Truncated to 54 characters so suffixes such as "-headless" keep it within 63.
*/}}
{{- define "loopwarden.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 54 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 54 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 54 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "loopwarden.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Labels that select the daemon's pods; never change them in an upgrade. */}}
{{- define "loopwarden.selectorLabels" -}}
app.kubernetes.io/name: {{ include "loopwarden.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "loopwarden.labels" -}}
helm.sh/chart: {{ include "loopwarden.chart" . }}
{{ include "loopwarden.selectorLabels" . }}
app.kubernetes.io/version: {{ (default .Chart.AppVersion .Values.image.tag) | trunc 63 | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: loopwarden
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{- define "loopwarden.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "loopwarden.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "loopwarden.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{/* Label that admits a pod through the NetworkPolicy as a gRPC client. */}}
{{- define "loopwarden.clientLabel" -}}
{{ include "loopwarden.fullname" . }}-client
{{- end }}

{{/* Where the ConfigMap is mounted (a directory, never subPath) and the file the daemon reads. */}}
{{- define "loopwarden.configDir" -}}
/etc/loopwarden
{{- end }}
{{- define "loopwarden.configFile" -}}
loopwarden.json5
{{- end }}

{{/* The rendered config file: JSON, which is valid JSON5. */}}
{{- define "loopwarden.configText" -}}
// Rendered by Helm from .Values.config of release {{ .Release.Name }}: change the values, not this file.
{{ toPrettyJson .Values.config }}
{{- end }}
