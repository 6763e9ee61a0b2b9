//go:build tools

// Pins the Helm command that the chart tests build into the cache.
package tools

import _ "helm.sh/helm/v4/cmd/helm"
