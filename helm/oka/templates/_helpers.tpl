{{/* Names */}}
{{- define "oka.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "oka.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "oka.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Standard labels; pass (dict "ctx" $ "component" "server") */}}
{{- define "oka.labels" -}}
helm.sh/chart: {{ include "oka.chart" .ctx }}
{{ include "oka.selectorLabels" . }}
app.kubernetes.io/version: {{ include "oka.imageTag" .ctx | replace "+" "_" | trunc 63 | quote }}
app.kubernetes.io/managed-by: {{ .ctx.Release.Service }}
app.kubernetes.io/part-of: oka
{{- end }}

{{- define "oka.selectorLabels" -}}
app.kubernetes.io/name: {{ include "oka.name" .ctx }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{- define "oka.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "oka.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The image; `latest` is refused (pinned tags only). */}}
{{- define "oka.imageTag" -}}
{{- $tag := default .Chart.AppVersion .Values.image.tag | toString }}
{{- if eq $tag "latest" }}
{{- fail "image.tag: `latest` is not allowed; pin a version (default: the chart's appVersion)" }}
{{- end }}
{{- $tag }}
{{- end }}

{{- define "oka.image" -}}
{{- printf "%s:%s" .Values.image.repository (include "oka.imageTag" .) }}
{{- end }}

{{/* The spec ConfigMap: the chart's or an existing one */}}
{{- define "oka.specConfigMapName" -}}
{{- default (printf "%s-spec" (include "oka.fullname" .)) .Values.spec.existingConfigMap }}
{{- end }}

{{- define "oka.specKey" -}}
{{- if .Values.spec.existingConfigMap }}{{ .Values.spec.existingConfigMapKey }}{{ else }}spec.yaml{{ end }}
{{- end }}

{{/* Store: password Secret and URL */}}
{{- define "oka.storeHasPassword" -}}
{{- if or .Values.store.password .Values.store.existingSecret (and .Values.redis.enabled .Values.redis.auth) }}true{{ end }}
{{- end }}

{{- define "oka.storeSecretName" -}}
{{- default (printf "%s-store" (include "oka.fullname" .)) .Values.store.existingSecret }}
{{- end }}

{{- define "oka.storeSecretKey" -}}
{{- if .Values.store.existingSecret }}{{ .Values.store.existingSecretPasswordKey }}{{ else }}redis-password{{ end }}
{{- end }}

{{- define "oka.redisHost" -}}
{{- printf "%s-redis" (include "oka.fullname" .) }}
{{- end }}

{{/* The store URL without credentials */}}
{{- define "oka.storeBaseURL" -}}
{{- if .Values.store.url }}
{{- .Values.store.url }}
{{- else if .Values.redis.enabled }}
{{- printf "redis://%s:6379" (include "oka.redisHost" .) }}
{{- else }}
{{- "memory://" }}
{{- end }}
{{- end }}

{{- define "oka.storeIsMemory" -}}
{{- if hasPrefix "memory:" (include "oka.storeBaseURL" .) }}true{{ end }}
{{- end }}

{{/* The store URL with credentials; $(REDIS_PASSWORD) is expanded by the kubelet */}}
{{- define "oka.storeURL" -}}
{{- $base := include "oka.storeBaseURL" . }}
{{- if and (include "oka.storeHasPassword" .) (not (include "oka.storeIsMemory" .)) }}
{{- if not (contains "://" $base) }}
{{- fail (printf "store.url: %q has no scheme (redis://host:6379)" $base) }}
{{- end }}
{{- $parts := splitn "://" 2 $base }}
{{- $authority := index (splitList "/" $parts._1) 0 }}
{{- if contains "@" $authority }}
{{- fail "store.url: leave credentials out of the URL; use store.username and store.password or store.existingSecret" }}
{{- end }}
{{- printf "%s://%s:$(REDIS_PASSWORD)@%s" $parts._0 .Values.store.username $parts._1 }}
{{- else if and .Values.store.username (not (include "oka.storeIsMemory" .)) }}
{{- $parts := splitn "://" 2 $base }}
{{- printf "%s://%s@%s" $parts._0 .Values.store.username $parts._1 }}
{{- else }}
{{- $base }}
{{- end }}
{{- end }}

{{/* The store environment, shared by the server, the seed Job */}}
{{- define "oka.storeEnv" -}}
{{- if and (include "oka.storeHasPassword" .) (not (include "oka.storeIsMemory" .)) }}
- name: REDIS_PASSWORD
  valueFrom:
    secretKeyRef:
      name: {{ include "oka.storeSecretName" . }}
      key: {{ include "oka.storeSecretKey" . }}
{{- end }}
- name: OKA_STORE
  value: {{ include "oka.storeURL" . | quote }}
- name: OKA_STORE_KEY_PREFIX
  value: {{ .Values.store.keyPrefix | quote }}
- name: OKA_STORE_TIMEOUT_MS
  value: {{ .Values.store.timeoutMs | quote }}
- name: OKA_STORE_CONNECT_TIMEOUT_MS
  value: {{ .Values.store.connectTimeoutMs | quote }}
- name: OKA_STORE_POOL_SIZE
  value: {{ .Values.store.poolSize | quote }}
{{- if .Values.store.tlsCaConfigMap }}
- name: OKA_STORE_TLS_CA_FILE
  value: /etc/oka/store-ca/ca.crt
{{- end }}
{{- end }}

{{/* An init container that waits for the bundled Redis to accept connections */}}
{{- define "oka.waitForRedis" -}}
- name: wait-for-redis
  image: {{ include "oka.image" . }}
  imagePullPolicy: {{ .Values.image.pullPolicy }}
  command:
    - bash
    - -c
    - |
      for i in $(seq 1 300); do
        if (exec 3<>/dev/tcp/{{ include "oka.redisHost" . }}/6379) 2>/dev/null; then exit 0; fi
        echo "waiting for {{ include "oka.redisHost" . }}:6379"; sleep 2
      done
      exit 1
  securityContext:
    {{- toYaml .Values.securityContext | nindent 4 }}
{{- end }}

{{/* API keys Secret */}}
{{- define "oka.authSecretName" -}}
{{- default (printf "%s-api-keys" (include "oka.fullname" .)) .Values.auth.existingSecret }}
{{- end }}

{{- define "oka.authSecretKey" -}}
{{- if .Values.auth.existingSecret }}{{ .Values.auth.existingSecretKey }}{{ else }}keys.txt{{ end }}
{{- end }}

{{- define "oka.apiKeysFile" -}}
# Oka API keys: `<key> <scope>[,<scope>]` per line (docs/operations.md#authentication)
{{- range .Values.auth.apiKeys }}
{{ .key }} {{ join "," .scopes }}
{{- end }}
{{- range .Values.auth.certIdentities }}
cert:{{ .identity }} {{ join "," .scopes }}
{{- end }}
{{ end }}

{{/* The probes' scheme: HTTPS when the admin port serves TLS */}}
{{- define "oka.adminScheme" -}}
{{- if and .Values.tls.enabled .Values.tls.admin }}HTTPS{{ else }}HTTP{{ end }}
{{- end }}

{{/* terminationGracePeriodSeconds: shutdown delay + shutdown grace + 10 s, or the set value */}}
{{- define "oka.minTerminationGrace" -}}
{{- add .Values.lifecycle.shutdownDelaySeconds .Values.server.shutdownGraceSeconds 10 }}
{{- end }}

{{- define "oka.terminationGrace" -}}
{{- $min := include "oka.minTerminationGrace" . | int }}
{{- $set := .Values.terminationGracePeriodSeconds | int }}
{{- if eq $set 0 }}
{{- $min }}
{{- else if lt $set $min }}
{{- fail (printf "terminationGracePeriodSeconds %d is below lifecycle.shutdownDelaySeconds + server.shutdownGraceSeconds + 10 = %d" $set $min) }}
{{- else }}
{{- $set }}
{{- end }}
{{- end }}

{{/* Checks that need more than the schema */}}
{{- define "oka.validate" -}}
{{- if and .Values.auth.enabled (not .Values.auth.existingSecret) (not .Values.auth.apiKeys) }}
{{- fail "auth.enabled needs auth.apiKeys or auth.existingSecret" }}
{{- end }}
{{- if and .Values.seedData.enabled (include "oka.storeIsMemory" .) }}
{{- fail "seedData.enabled needs a shared store (store.url or redis.enabled); with memory:// each pod has its own data" }}
{{- end }}
{{- if and .Values.redis.enabled (not .Values.redis.auth) (or .Values.store.password .Values.store.existingSecret) }}
{{- fail "redis.auth is false but a store password is set: the bundled Redis would refuse AUTH" }}
{{- end }}
{{- if and .Values.redis.enabled .Values.store.url }}
{{- fail "store.url and redis.enabled are exclusive: the bundled Redis is used when store.url is empty" }}
{{- end }}
{{- if le (mul .Values.probes.readiness.timeoutSeconds 1000 | int) (.Values.store.timeoutMs | int) }}
{{- fail (printf "probes.readiness.timeoutSeconds (%d s) must be longer than store.timeoutMs (%d ms): /readyz waits for the store" (.Values.probes.readiness.timeoutSeconds | int) (.Values.store.timeoutMs | int)) }}
{{- end }}
{{- if and .Values.kafkaSource.enabled .Values.spec.demo }}
{{- fail "kafkaSource.enabled needs a spec with Kafka sources (spec.content or spec.existingConfigMap, spec.demo: false); the demo spec has none" }}
{{- end }}
{{- if and .Values.kafkaSource.enabled (include "oka.storeIsMemory" .) }}
{{- fail "kafkaSource.enabled needs a shared store (store.url or redis.enabled): with memory:// the consumer would write into its own process" }}
{{- end }}
{{- if and .Values.ingress.enabled .Values.ingress.alb.enabled (ge (.Values.ingress.alb.deregistrationDelaySeconds | int) (.Values.lifecycle.shutdownDelaySeconds | int)) }}
{{- fail "ingress.alb.deregistrationDelaySeconds must be below lifecycle.shutdownDelaySeconds, so the ALB has drained a pod before Oka closes its listeners" }}
{{- end }}
{{- end }}

{{/*
Tracing's environment (docs/operations.md#tracing): the collector, the protocol, the
ratio, and the pod as resource attributes. Empty when tracing is off.
*/}}
{{- define "oka.tracingEnv" -}}
{{- $t := .Values.tracing }}
{{- if or $t.otlpEndpoint $t.nodeCollector }}
- name: OKA_POD_NAME
  valueFrom:
    fieldRef: {fieldPath: metadata.name}
- name: OKA_POD_NAMESPACE
  valueFrom:
    fieldRef: {fieldPath: metadata.namespace}
{{- if $t.nodeCollector }}
- name: OKA_NODE_IP
  valueFrom:
    fieldRef: {fieldPath: status.hostIP}
- name: OTEL_EXPORTER_OTLP_ENDPOINT
  value: "http://$(OKA_NODE_IP):{{ $t.nodeCollectorPort }}"
{{- else }}
- name: OTEL_EXPORTER_OTLP_ENDPOINT
  value: {{ $t.otlpEndpoint | quote }}
{{- end }}
- name: OTEL_EXPORTER_OTLP_PROTOCOL
  value: {{ $t.protocol | quote }}
- name: OTEL_TRACES_SAMPLER_ARG
  value: {{ $t.sampleRatio | quote }}
- name: OTEL_RESOURCE_ATTRIBUTES
  value: "k8s.pod.name=$(OKA_POD_NAME),k8s.namespace.name=$(OKA_POD_NAMESPACE)"
{{- end }}
{{- end }}
