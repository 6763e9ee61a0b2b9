{{- /*
Names, labels and small shared pieces of the chart. templates/rbac.yaml relies on paddock.fullname,
paddock.labels, paddock.serviceAccountName, paddock.githubWebhookServer.fullname and
paddock.githubWebhookServer.serviceAccountName; _scope.tpl defines paddock.watchNamespace.
*/ -}}

{{- /* The chart's name, or nameOverride (63 characters at most: a label value). */ -}}
{{- define "paddock.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- /*
The base name of every object: fullnameOverride, else the release name when it already contains
the chart's name ("paddock", "paddock-prod"), else "<release>-<name>". 63 characters at most.
*/ -}}
{{- define "paddock.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- /* A value as text; whole numbers stay whole (Helm reads YAML numbers as floats: 123456 not 1.23456e+05). */ -}}
{{- define "paddock.string" -}}
{{- if kindIs "float64" . -}}
{{- if eq (float64 (int64 .)) . -}}{{ int64 . }}{{- else -}}{{ . }}{{- end -}}
{{- else -}}
{{- toString . -}}
{{- end -}}
{{- end -}}

{{- define "paddock.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- /* Labels on every object of the release (plus the user's `labels`). */ -}}
{{- define "paddock.labels" -}}
helm.sh/chart: {{ include "paddock.chart" . }}
app.kubernetes.io/name: {{ include "paddock.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: paddock
{{- with .Values.labels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- /* The controller's pods (paddock run). Distinct from the webhook server's, so no selector overlaps. */ -}}
{{- define "paddock.selectorLabels" -}}
app.kubernetes.io/name: {{ include "paddock.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: controller-manager
{{- end -}}

{{- define "paddock.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "paddock.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- /* The Secret with the GitHub credentials (ARC's authSecret.name, default controller-manager). */ -}}
{{- define "paddock.authSecretName" -}}
{{- default (include "paddock.fullname" .) .Values.authSecret.name -}}
{{- end -}}

{{- /* paddock registers its admission webhooks at port 443 of this Service (--webhook-service). */ -}}
{{- define "paddock.webhookServiceName" -}}
{{- printf "%s-webhook" (include "paddock.fullname" . | trunc 55 | trimSuffix "-") -}}
{{- end -}}

{{- define "paddock.metricsServiceName" -}}
{{- printf "%s-metrics" (include "paddock.fullname" . | trunc 55 | trimSuffix "-") -}}
{{- end -}}

{{- define "paddock.leaderElectionId" -}}
{{- default (include "paddock.fullname" .) .Values.leaderElectionId -}}
{{- end -}}

{{- /* Leader election: as asked, and always when more than one replica runs. */ -}}
{{- define "paddock.leaderElection" -}}
{{- if or .Values.enableLeaderElection (gt (int .Values.replicaCount) 1) -}}true{{- end -}}
{{- end -}}

{{- /* The address of /healthz and /readyz: ARC's healthProbeBindAddress, ":8081" when empty. */ -}}
{{- define "paddock.healthProbeAddr" -}}
{{- default ":8081" .Values.healthProbeBindAddress -}}
{{- end -}}

{{- define "paddock.healthProbePort" -}}
{{- regexFind "[0-9]+$" (include "paddock.healthProbeAddr" .) -}}
{{- end -}}

{{- define "paddock.metricsPort" -}}
{{- default 8080 .Values.metrics.port -}}
{{- end -}}

{{- define "paddock.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion (toString (default "" .Values.image.tag))) -}}
{{- end -}}

{{- /*
Extra environment variables in either of ARC's two shapes: a list of EnvVar objects, or a map of
name to value. Called with the value itself.
*/ -}}
{{- define "paddock.extraEnv" -}}
{{- if kindIs "slice" . -}}
{{- if . }}
{{ toYaml . }}
{{- end -}}
{{- else if kindIs "map" . -}}
{{- range $name, $value := . }}
- name: {{ $name | quote }}
  value: {{ include "paddock.string" $value | quote }}
{{- end -}}
{{- end -}}
{{- end -}}

{{- /* The GitHub credential variables, each from its ARC key in the named Secret (optional keys). */ -}}
{{- define "paddock.githubCredentialsEnv" -}}
{{- $secret := . -}}
{{- range $var, $key := dict "GITHUB_TOKEN" "github_token" "GITHUB_APP_ID" "github_app_id" "GITHUB_APP_INSTALLATION_ID" "github_app_installation_id" "GITHUB_APP_PRIVATE_KEY" "github_app_private_key" }}
- name: {{ $var }}
  valueFrom:
    secretKeyRef:
      name: {{ $secret | quote }}
      key: {{ $key }}
      optional: true
{{- end -}}
{{- end -}}

{{- /* The Secret keys paddock reads, from the values that carry them (only the non-empty ones). */ -}}
{{- define "paddock.githubCredentialsData" -}}
{{- range $key := list "github_token" "github_app_id" "github_app_installation_id" "github_app_private_key" }}
{{- with (get $ (toString $key)) }}
{{ $key }}: {{ include "paddock.string" . | b64enc | quote }}
{{- end -}}
{{- end -}}
{{- end -}}

{{- /* ---- github-webhook-server (paddock webhook-server) ---- */ -}}

{{- define "paddock.githubWebhookServer.name" -}}
{{- default (printf "%s-github-webhook-server" (include "paddock.name" . | trunc 40 | trimSuffix "-")) .Values.githubWebhookServer.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "paddock.githubWebhookServer.fullname" -}}
{{- if .Values.githubWebhookServer.fullnameOverride -}}
{{- .Values.githubWebhookServer.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-github-webhook-server" (include "paddock.fullname" . | trunc 40 | trimSuffix "-") -}}
{{- end -}}
{{- end -}}

{{- define "paddock.githubWebhookServer.selectorLabels" -}}
app.kubernetes.io/name: {{ include "paddock.githubWebhookServer.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: github-webhook-server
{{- end -}}

{{- define "paddock.githubWebhookServer.serviceAccountName" -}}
{{- $sa := .Values.githubWebhookServer.serviceAccount -}}
{{- if $sa.create -}}
{{- default (include "paddock.githubWebhookServer.fullname" .) $sa.name -}}
{{- else -}}
{{- default "default" $sa.name -}}
{{- end -}}
{{- end -}}

{{- define "paddock.githubWebhookServer.secretName" -}}
{{- default (include "paddock.githubWebhookServer.fullname" .) .Values.githubWebhookServer.secret.name -}}
{{- end -}}

{{- define "paddock.githubWebhookServer.metricsServiceName" -}}
{{- printf "%s-metrics" (include "paddock.githubWebhookServer.fullname" . | trunc 55 | trimSuffix "-") -}}
{{- end -}}

{{- /* The API server addresses for the NetworkPolicy, as CIDRs, one per line (see networkpolicy.yaml). */ -}}
{{- define "paddock.apiServerCIDRs" -}}
{{- $cidrs := list -}}
{{- range .Values.networkPolicy.apiServerCIDRs -}}
{{- $cidrs = append $cidrs (toString .) -}}
{{- end -}}
{{- if not $cidrs -}}
{{- /* helm template and --dry-run=client see no cluster: lookup returns nothing. */ -}}
{{- $slices := lookup "discovery.k8s.io/v1" "EndpointSlice" "default" "" -}}
{{- range (get (default dict $slices) "items" | default list) -}}
{{- if eq (get (default dict .metadata.labels) "kubernetes.io/service-name") "kubernetes" -}}
{{- range (default list .endpoints) -}}
{{- range (default list .addresses) -}}
{{- $cidrs = append $cidrs (printf "%s/%s" . (ternary "128" "32" (contains ":" .))) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- if not $cidrs -}}
{{- /* Clusters without the API server's EndpointSlice: the (deprecated) Endpoints. */ -}}
{{- $endpoints := lookup "v1" "Endpoints" "default" "kubernetes" -}}
{{- range (get (default dict $endpoints) "subsets" | default list) -}}
{{- range (default list .addresses) -}}
{{- $cidrs = append $cidrs (printf "%s/%s" .ip (ternary "128" "32" (contains ":" .ip))) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- range (uniq $cidrs) }}
{{ . }}
{{- end -}}
{{- end -}}

{{- /* An int-or-string value (a PodDisruptionBudget's 1 or "50%"). */ -}}
{{- define "paddock.intOrString" -}}
{{- if and (kindIs "string" .) (not (regexMatch "^[0-9]+$" .)) -}}{{ . | quote }}{{- else -}}{{ include "paddock.string" . }}{{- end -}}
{{- end -}}
