{{/* Names and labels. */}}
{{- define "sealer.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "sealer.fullname" -}}
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

{{- define "sealer.selectorLabels" -}}
app.kubernetes.io/name: {{ include "sealer.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "sealer.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "sealer.selectorLabels" . }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "sealer.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "sealer.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* sealer.seconds: a duration such as 1m30s (whole h, m, s) in seconds, rounded up for ms. */}}
{{- define "sealer.seconds" -}}
{{- $total := 0 -}}
{{- range regexFindAll "[0-9]+(ms|h|m|s)" (toString .) -1 -}}
{{- if hasSuffix "ms" . -}}
{{- $total = add $total (div (add (atoi (trimSuffix "ms" .)) 999) 1000) -}}
{{- else if hasSuffix "h" . -}}
{{- $total = add $total (mul (atoi (trimSuffix "h" .)) 3600) -}}
{{- else if hasSuffix "m" . -}}
{{- $total = add $total (mul (atoi (trimSuffix "m" .)) 60) -}}
{{- else -}}
{{- $total = add $total (atoi (trimSuffix "s" .)) -}}
{{- end -}}
{{- end -}}
{{- $total -}}
{{- end -}}

{{/* sealer.tenantsSource: where the tenants file comes from, or "" without tenants. */}}
{{- define "sealer.tenantsSource" -}}
{{- if .Values.tenants.inline -}}inline
{{- else if .Values.tenants.configMapName -}}configMap
{{- else if .Values.tenants.secretName -}}secret
{{- end -}}
{{- end -}}

{{/* sealer.validate: refuse what the sealer would refuse, or what would not work as a fleet. */}}
{{- define "sealer.validate" -}}
{{- $v := .Values -}}
{{- if gt (int $v.replicaCount) 1 -}}
{{- if and (eq $v.keys.source "file") (not $v.keys.file.secretName) -}}
{{- fail (printf "replicaCount %d with keys.source=file and no keys.file.secretName: every pod would generate its own key file, and no replica could open another's states. Give a shared key file Secret (keys.file.secretName) or Vault (keys.source=vault-transit or vault-kv), or run one replica." (int $v.replicaCount)) -}}
{{- end -}}
{{- if eq $v.ledger.type "embedded" -}}
{{- fail (printf "replicaCount %d with ledger.type=embedded: each pod would keep its own one-time ledger, so a one-time state could open once per replica. Use the Redis ledger (ledger.type=redis), or run one replica." (int $v.replicaCount)) -}}
{{- end -}}
{{- end -}}
{{- if not $v.insecure -}}
{{- if not $v.tls.secretName -}}
{{- fail "tls.secretName is empty: the sealer refuses to listen beyond loopback without TLS and tenants. Give a TLS Secret, or set insecure=true (tests only)." -}}
{{- end -}}
{{- if not (include "sealer.tenantsSource" .) -}}
{{- fail "no tenants (tenants.secretName, tenants.configMapName or tenants.inline): the sealer refuses to listen beyond loopback without client authentication. Give a tenants file, or set insecure=true (tests only)." -}}
{{- end -}}
{{- end -}}
{{- if hasPrefix "vault-" $v.keys.source -}}
{{- if not $v.vault.addr -}}
{{- fail (printf "keys.source=%s needs vault.addr" $v.keys.source) -}}
{{- end -}}
{{- if and (eq $v.vault.auth "approle") (not $v.vault.approle.secretName) -}}
{{- fail "vault.auth=approle needs vault.approle.secretName" -}}
{{- end -}}
{{- if and (eq $v.vault.auth "token") (not $v.vault.token.secretName) -}}
{{- fail "vault.auth=token needs vault.token.secretName" -}}
{{- end -}}
{{- if and (eq $v.vault.auth "kubernetes") (not $v.vault.kubernetes.role) -}}
{{- fail "vault.auth=kubernetes needs vault.kubernetes.role" -}}
{{- end -}}
{{- if and (hasPrefix "vault-transit" $v.keys.source) (not $v.vault.transit.key) -}}
{{- fail (printf "keys.source=%s needs vault.transit.key" $v.keys.source) -}}
{{- end -}}
{{- if and $v.vault.transit.previousKey (ne $v.keys.source "vault-transit") -}}
{{- fail "vault.transit.previousKey is for keys.source=vault-transit only: the move from an exportable key" -}}
{{- end -}}
{{- if and (eq $v.keys.source "vault-kv") (not $v.vault.kv.path) -}}
{{- fail "keys.source=vault-kv needs vault.kv.path" -}}
{{- end -}}
{{- end -}}
{{- if and (eq $v.ledger.type "redis") (not $v.ledger.redis.urlSecret.name) -}}
{{- fail "ledger.type=redis needs ledger.redis.urlSecret.name (a Secret holding the Redis URL)" -}}
{{- end -}}
{{- end -}}
