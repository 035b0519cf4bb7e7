{{- define "sonde.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- /* Object name prefix; room is left for the longest suffix ("-operator-metrics"). */ -}}
{{- define "sonde.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 46 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 46 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 46 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "sonde.labels" -}}
app.kubernetes.io/name: {{ include "sonde.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{- define "sonde.operator.selectorLabels" -}}
app.kubernetes.io/name: {{ include "sonde.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: operator
{{- end -}}

{{- define "sonde.agent.selectorLabels" -}}
app.kubernetes.io/name: {{ include "sonde.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: agent
{{- end -}}

{{- /* The image: global.imageRegistry, when set, replaces the registry part of image.repository
(its first path component when that names a host: has a "." or ":", or is localhost) or is put
in front of it; image.digest, when set, pins it (repository@digest; the tag is then not used). */ -}}
{{- define "sonde.image" -}}
{{- $repo := .Values.image.repository -}}
{{- $registry := (.Values.global).imageRegistry -}}
{{- if $registry -}}
{{- $parts := splitList "/" $repo -}}
{{- $first := first $parts -}}
{{- if and (gt (len $parts) 1) (or (contains "." $first) (contains ":" $first) (eq $first "localhost")) -}}
{{- $repo = join "/" (rest $parts) -}}
{{- end -}}
{{- $repo = printf "%s/%s" (trimSuffix "/" $registry) $repo -}}
{{- end -}}
{{- if .Values.image.digest -}}
{{ $repo }}@{{ .Values.image.digest }}
{{- else -}}
{{ $repo }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}
{{- end -}}

{{- /* imagePullSecrets, then global.imagePullSecrets (an umbrella chart's), without repeats. */ -}}
{{- define "sonde.imagePullSecrets" -}}
{{- $all := concat (.Values.imagePullSecrets | default list) ((.Values.global).imagePullSecrets | default list) | uniq -}}
{{- with $all }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{- define "sonde.operator.serviceAccountName" -}}
{{- if .Values.operator.serviceAccount.create -}}
{{- default (printf "%s-operator" (include "sonde.fullname" .)) .Values.operator.serviceAccount.name -}}
{{- else -}}
{{- required "operator.serviceAccount.name is required when operator.serviceAccount.create is false" .Values.operator.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "sonde.agent.serviceAccountName" -}}
{{- if .Values.agent.serviceAccount.create -}}
{{- default (printf "%s-agent" (include "sonde.fullname" .)) .Values.agent.serviceAccount.name -}}
{{- else -}}
{{- required "agent.serviceAccount.name is required when agent.serviceAccount.create is false" .Values.agent.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- /* agent.tls: the Secret holding the agents' serving certificate (the user's, or the one
cert-manager writes for the chart's Certificate), or "" when the agents serve plain HTTP. */ -}}
{{- define "sonde.agent.tlsSecret" -}}
{{- $tls := .Values.agent.tls -}}
{{- if and $tls.secretName $tls.certManagerIssuer -}}
{{- fail "agent.tls: name either secretName (your Secret) or certManagerIssuer (a Certificate the chart creates), not both" -}}
{{- else if $tls.secretName -}}
{{- $tls.secretName -}}
{{- else if $tls.certManagerIssuer -}}
{{- $_ := required "agent.tls.certManagerIssuer.name is required (the Issuer or ClusterIssuer that signs the agents' certificate)" $tls.certManagerIssuer.name -}}
{{- printf "%s-agent-tls" (include "sonde.fullname" .) -}}
{{- end -}}
{{- end -}}

{{- /* The DNS name in the agents' serving certificate, which scrapes check (agent.tls.serverName). */ -}}
{{- define "sonde.agent.tlsServerName" -}}
{{- default (printf "%s-agent.%s.svc" (include "sonde.fullname" .) .Release.Namespace) .Values.agent.tls.serverName -}}
{{- end -}}

{{- /* Prometheus's conventional pod annotations (metrics.scrapeAnnotations); the argument is
the port. Scrape configs that read them (e.g. the prometheus-community chart's
"kubernetes-pods" job) must keep the target's own labels: honor_labels: true. */ -}}
{{- define "sonde.scrapeAnnotations" -}}
prometheus.io/scrape: "true"
prometheus.io/port: {{ .port | quote }}
prometheus.io/path: /metrics
{{- if .tls }}
prometheus.io/scheme: https
{{- end }}
{{- end -}}

{{- /* A DaemonSet's updateStrategy or a Deployment's strategy from values: rollingUpdate only with
type RollingUpdate (the API server refuses it with OnDelete or Recreate, and values merged from
the defaults would otherwise carry it along). */ -}}
{{- define "sonde.updateStrategy" -}}
{{- $type := .type | default "RollingUpdate" -}}
type: {{ $type }}
{{- if and (eq $type "RollingUpdate") .rollingUpdate }}
rollingUpdate:
  {{- toYaml .rollingUpdate | nindent 2 }}
{{- end }}
{{- end -}}
