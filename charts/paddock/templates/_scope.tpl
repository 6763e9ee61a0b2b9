{{- /* The one namespace paddock watches, or "" for all: scope.watchNamespace, else the release's own with scope.singleNamespace (ARC's meaning). */ -}}
{{- define "paddock.watchNamespace" -}}
{{- if .Values.scope.watchNamespace -}}
{{- .Values.scope.watchNamespace -}}
{{- else if .Values.scope.singleNamespace -}}
{{- .Release.Namespace -}}
{{- end -}}
{{- end -}}
