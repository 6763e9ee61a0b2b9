import type * as Http from 'node:http';
import type * as Https from 'node:https';
import { createRequire } from 'node:module';
import type * as Zlib from 'node:zlib';

/**
 * node:http and node:https loaded with require() (node:zlib too, when first needed). An ESM `import`
 * of node:http builds the module's ESM namespace, which reads every export, among them the lazy
 * `WebSocket` and `MessageEvent` getters: that loads undici, 30–50 ms of a cold start, for classes
 * paddock never uses. Type-only imports of these modules cost nothing.
 */
const require = createRequire(import.meta.url);

export const http = require('node:http') as typeof Http;
export const https = require('node:https') as typeof Https;
let zlibModule: typeof Zlib | undefined;
export function zlib(): typeof Zlib {
  zlibModule ??= require('node:zlib') as typeof Zlib;
  return zlibModule;
}
