'use strict';
// Stands in for @opentelemetry/api in the bundle. prom-client's CPU counter requires it at load time
// but calls it only when exemplars are enabled, which paddock never does; with no tracing SDK
// registered the real API answers the same: no active span.
module.exports = {
  context: { active: () => undefined },
  trace: { getSpan: () => undefined },
};
