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

{{/*
The daemon image. No public image is published: the default repository, `loopwarden`, is what a
local `docker build -t loopwarden:<appVersion>` produces, so the defaults render and run on a
cluster that was given the local image. An empty repository would render ":TAG", which no runtime
pulls: the message says what to set instead.
NOTE: the message starts on a line of its own, after Helm's "execution error at (...):" prefix,
which is also where helm-unittest's failedTemplate starts reading a multi-line message.
*/}}
{{- define "loopwarden.image" -}}
{{- if not .Values.image.repository }}
{{- fail (printf "\nimage.repository is empty: no public loopwarden image is published. From the repository root, build one:\n  docker build -f server/Dockerfile -t loopwarden:%s .\nand leave image.repository at its default (loopwarden) for a cluster that sees local images (kind load docker-image loopwarden:%s), or push it and install with --set image.repository=REGISTRY/loopwarden (image.tag defaults to the chart's appVersion, %s)" .Chart.AppVersion .Chart.AppVersion .Chart.AppVersion) }}
{{- end }}
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
{{- define "loopwarden.stateDir" -}}
/var/lib/loopwarden-state
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

{{/* generated:limit-flags:begin (tables/loopwarden.toml [[limit]]: edit there, then `make tables`) */}}
{{/* daemon.limits keys and the `loopwarden serve` flags they set, one "key flag" a line, in
the order the args are rendered (a limit of 0 leaves its flag out: the daemon default). */}}
{{- define "loopwarden.limitFlags" -}}
maxParamsBytes --max-params-bytes
maxResultBytes --max-result-bytes
maxRunIdChars --max-run-id-chars
maxToolNameChars --max-tool-name-chars
maxAgentIdChars --max-agent-id-chars
maxSessionIdChars --max-session-id-chars
maxToolCallIdChars --max-tool-call-id-chars
maxJsonDepth --max-json-depth
maxOutputTextBytes --max-output-text-bytes
maxEventsPerRequest --max-events-per-request
maxMessageBytes --max-message-bytes
maxStreams --max-streams
streamIdleTimeoutSeconds --stream-idle-timeout
{{- end }}
{{/* generated:limit-flags:end */}}

{{/* The most replicas that can run at once: autoscaling.maxReplicas with autoscaling on, else replicaCount. */}}
{{- define "loopwarden.maxReplicas" -}}
{{- if .Values.autoscaling.enabled }}{{ .Values.autoscaling.maxReplicas }}{{ else }}{{ .Values.replicaCount }}{{ end }}
{{- end }}

{{/*
The pod's affinity: .Values.affinity, plus a pod anti-affinity on the node (replicaSpread) when
more than one replica can run and the values set none of their own. Empty when there is nothing.
*/}}
{{- define "loopwarden.affinity" -}}
{{- $affinity := deepCopy .Values.affinity }}
{{- $preset := .Values.replicaSpread.podAntiAffinity }}
{{- if and (gt (int (include "loopwarden.maxReplicas" .)) 1) (ne $preset "none") (not (hasKey $affinity "podAntiAffinity")) }}
{{- $term := dict "labelSelector" (dict "matchLabels" (include "loopwarden.selectorLabels" . | fromYaml)) "topologyKey" "kubernetes.io/hostname" }}
{{- if eq $preset "hard" }}
{{- $_ := set $affinity "podAntiAffinity" (dict "requiredDuringSchedulingIgnoredDuringExecution" (list $term)) }}
{{- else }}
{{- $_ := set $affinity "podAntiAffinity" (dict "preferredDuringSchedulingIgnoredDuringExecution" (list (dict "weight" 100 "podAffinityTerm" $term))) }}
{{- end }}
{{- end }}
{{- if $affinity }}{{ toYaml $affinity }}{{ end }}
{{- end }}

{{/*
The pod's topology spread constraints, each with the pod selector filled in: the values' own, or,
when there are none and more than one replica can run, zones then nodes (replicaSpread).
*/}}
{{- define "loopwarden.topologySpreadConstraints" -}}
{{- $constraints := .Values.topologySpreadConstraints }}
{{- if and (not $constraints) .Values.replicaSpread.topologySpread (gt (int (include "loopwarden.maxReplicas" .)) 1) }}
{{- $constraints = list
  (dict "maxSkew" 1 "topologyKey" "topology.kubernetes.io/zone" "whenUnsatisfiable" "ScheduleAnyway")
  (dict "maxSkew" 1 "topologyKey" "kubernetes.io/hostname" "whenUnsatisfiable" "ScheduleAnyway") }}
{{- end }}
{{- $selector := dict "labelSelector" (dict "matchLabels" (include "loopwarden.selectorLabels" . | fromYaml)) }}
{{- $filled := list }}
{{- range $constraints }}
{{- $filled = append $filled (merge (dict) . $selector) }}
{{- end }}
{{- if $filled }}{{ toYaml $filled }}{{ end }}
{{- end }}

{{/*
Port of otlp.endpoint (host:port or scheme://host:port[/path]; the schema checks the shape), for
the NetworkPolicy's egress rule. Empty when no endpoint is set.
*/}}
{{- define "loopwarden.otlpPort" -}}
{{- with .Values.otlp.endpoint }}
{{- $hostPort := regexReplaceAll "^[a-z][a-z0-9+.-]*://" . "" | splitList "/" | first }}
{{- $port := int (regexFind "[0-9]+$" $hostPort) }}
{{- if or (lt $port 1) (gt $port 65535) }}
{{- fail (printf "otlp.endpoint %q: the port must be 1-65535" .) }}
{{- end }}
{{- $port }}
{{- end }}
{{- end }}
