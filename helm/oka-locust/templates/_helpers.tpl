{{- define "oka-locust.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "oka-locust.fullname" -}}
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

{{/* pass (dict "ctx" $ "component" "master") */}}
{{- define "oka-locust.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .ctx.Chart.Name .ctx.Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "oka-locust.selectorLabels" . }}
app.kubernetes.io/version: {{ .ctx.Values.image.tag | toString | replace "+" "_" | trunc 63 | quote }}
app.kubernetes.io/managed-by: {{ .ctx.Release.Service }}
app.kubernetes.io/part-of: oka
{{- end }}

{{- define "oka-locust.selectorLabels" -}}
app.kubernetes.io/name: {{ include "oka-locust.name" .ctx }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{- define "oka-locust.image" -}}
{{- if eq (toString .Values.image.tag) "latest" }}
{{- fail "image.tag: `latest` is not allowed; pin the Locust version" }}
{{- end }}
{{- printf "%s:%s" .Values.image.repository (toString .Values.image.tag) }}
{{- end }}

{{- define "oka-locust.configMapName" -}}
{{- default (printf "%s-files" (include "oka-locust.fullname" .)) .Values.locustFiles.existingConfigMap }}
{{- end }}

{{- define "oka-locust.masterHost" -}}
{{- printf "%s-master" (include "oka-locust.fullname" .) }}
{{- end }}

{{/* Pod-level settings shared by master and workers; pass (dict "ctx" $ "role" .Values.master) */}}
{{- define "oka-locust.podSpec" -}}
automountServiceAccountToken: false
securityContext:
  {{- toYaml .ctx.Values.podSecurityContext | nindent 2 }}
{{- with .ctx.Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .role.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .role.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/* The worker container */}}
{{- define "oka-locust.workerContainer" -}}
- name: worker
  image: {{ include "oka-locust.image" . }}
  imagePullPolicy: {{ .Values.image.pullPolicy }}
  # The image's entrypoint is `locust`.
  args:
    - -f
    - /mnt/locust/locustfile.py
    - --worker
    - --master-host
    - {{ include "oka-locust.masterHost" . }}
    - --master-port
    - {{ .Values.master.port | quote }}
  env:
    - name: PYTHONDONTWRITEBYTECODE
      value: "1"
  resources:
    {{- toYaml .Values.workers.resources | nindent 4 }}
  securityContext:
    {{- toYaml .Values.securityContext | nindent 4 }}
  volumeMounts:
    - name: locust-files
      mountPath: /mnt/locust
      readOnly: true
{{- end }}

{{- define "oka-locust.filesVolume" -}}
- name: locust-files
  configMap:
    name: {{ include "oka-locust.configMapName" . }}
{{- end }}

{{/* The workload: one of workload.registry, workload.existingConfigMap, workload.content */}}
{{- define "oka-locust.workloadConfigMapName" -}}
{{- default (printf "%s-workload" (include "oka-locust.fullname" .)) .Values.workload.existingConfigMap }}
{{- end }}

{{/* workload.content parsed (YAML or JSON) and checked, as JSON */}}
{{- define "oka-locust.workloadDoc" -}}
{{- $hint := "give a workload file: --set-file workload.content=locust/workloads/seed.yaml (the seed) or your own (locust/README.md, \"Workload files\"), workload.existingConfigMap, or workload.registry=true" }}
{{- $text := required (printf "workload.content is empty; %s" $hint) .Values.workload.content }}
{{- $doc := fromYaml $text }}
{{- if hasKey $doc "Error" }}
{{- fail (printf "workload.content is not a YAML or JSON mapping (%s); %s" (get $doc "Error") $hint) }}
{{- end }}
{{- if not (hasKey $doc "version") }}
{{- fail (printf "workload.content has no `version: 1`, so it is not a workload file; %s" $hint) }}
{{- end }}
{{- if regexMatch "[{,]\"(true|false)\":" (toJson $doc) }}
{{- fail "workload.content: a key was read as a boolean (`true`/`false`): Helm reads YAML 1.1, where a bare y, n, yes, no, on or off is a boolean. Quote such keys (\"n\": 3) or pass the workload as JSON" }}
{{- end }}
{{- if not (hasKey $doc "targets") }}
{{- fail (printf "workload.content has no `targets` (the features to request); %s" $hint) }}
{{- end }}
{{- toJson $doc }}
{{- end }}

{{/* The --oka-workload value the master passes to the locustfile */}}
{{- define "oka-locust.workloadArg" -}}
{{- if .Values.workload.registry }}
{{- if .Values.workload.existingConfigMap }}
{{- fail "workload.registry=true builds the workload from the server's registry: leave workload.existingConfigMap empty, or set workload.registry=false" }}
{{- end }}
{{- print "registry" }}
{{- else if .Values.workload.existingConfigMap }}
{{- printf "/mnt/workload/%s" .Values.workload.existingConfigMapKey }}
{{- else }}
{{- print "/mnt/workload/workload.json" }}
{{- end }}
{{- end }}

{{- define "oka-locust.workloadVolume" -}}
{{- if not .Values.workload.registry }}
- name: workload
  configMap:
    name: {{ include "oka-locust.workloadConfigMapName" . }}
{{- end }}
{{- end }}

{{- define "oka-locust.workloadMount" -}}
{{- if not .Values.workload.registry }}
- name: workload
  mountPath: /mnt/workload
  readOnly: true
{{- end }}
{{- end }}
