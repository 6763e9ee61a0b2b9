'use strict';
// Stands in for prom-client's Pushgateway client in the bundle: paddock pushes no metrics, and the
// real one loads `zlib` at every start. Constructing it says why it fails.
module.exports = class Pushgateway {
  constructor() {
    throw new Error('prom-client’s Pushgateway is not bundled with paddock (hack/bundle.ts, STUBBED_FILES)');
  }
};
