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

{{/*
Where the TLS Secret, the token Secret and the snapshot volume are mounted: each a directory of its
own (never subPath, never nested inside the ConfigMap's read-only /etc/loopwarden volume).
*/}}
{{- define "loopwarden.tlsDir" -}}
/etc/loopwarden-tls
{{- end }}
{{- define "loopwarden.authDir" -}}
/etc/loopwarden-auth
{{- end }}
{{- define "loopwarden.snapshotDir" -}}
/var/lib/loopwarden
{{- end }}
{{- define "loopwarden.snapshotFile" -}}
{{ include "loopwarden.snapshotDir" . }}/runs.snapshot
{{- end }}

{{/*
"true" when the gRPC port needs TLS or a bearer token. Kubernetes' native gRPC probes speak
neither, so the daemon then also serves plaintext health alone on daemon.healthPort, and the
probes and the helm test pod ask that port. Empty otherwise.
*/}}
{{- define "loopwarden.healthPortEnabled" -}}
{{- if or .Values.security.tls.secretName .Values.security.authToken.secretName }}true{{ end }}
{{- end }}

{{/* The container port the probes ask: the health-only port when it is on, else the gRPC port. */}}
{{- define "loopwarden.probePort" -}}
{{- if include "loopwarden.healthPortEnabled" . }}{{ .Values.daemon.healthPort }}{{ else }}{{ .Values.daemon.grpcPort }}{{ end }}
{{- end }}

{{/* daemon.limits keys and the `loopwarden serve` flags they set, one "key flag" a line, in
the order the args are rendered (a limit of 0 leaves its flag out: the daemon default). */}}
{{- define "loopwarden.limitFlags" -}}
maxJsonDepth --max-json-depth
maxEventsPerRequest --max-events-per-request
maxMessageBytes --max-message-bytes
maxStreams --max-streams
maxParamsBytes --max-params-bytes
maxResultBytes --max-result-bytes
{{- end }}
