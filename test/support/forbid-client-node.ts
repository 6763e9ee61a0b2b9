/**
 * A `node --import` module that makes loading @kubernetes/client-node fail: the test that `paddock run`
 * starts without it (the package costs ~87 MiB of resident memory; paddock's commands load kubeconfigs
 * with src/runtime/kubeconfig.ts instead). Any resolution into the package throws, whoever asks.
 */
import { registerHooks } from 'node:module';

const PACKAGE = '@kubernetes/client-node';

registerHooks({
  resolve(specifier, context, nextResolve) {
    const forbidden = () =>
      new Error(`${PACKAGE} must not be loaded here (imported as ${specifier} from ${context.parentURL})`);
    if (specifier === PACKAGE || specifier.startsWith(`${PACKAGE}/`)) throw forbidden();
    const resolved = nextResolve(specifier, context);
    if (resolved.url.includes(`/node_modules/${PACKAGE}/`)) throw forbidden();
    return resolved;
  },
});
