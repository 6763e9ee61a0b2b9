/**
 * zod as paddock uses it: the tree-shakable `zod/mini` API, with the English messages that the
 * classic API loads by default (mini loads none: every issue would read "Invalid input").
 *
 * Why mini: with the classic API every schema drags in the whole library, ~730 KiB of the `run`
 * bundle that Node.js compiled on every start; paddock's schemas need ~50 KiB of it.
 */
import { en } from 'zod/locales';
import { config } from 'zod/mini';

config(en());

// Imported as a namespace (`import * as z`): a bundler keeps only the members that are used.
export * from 'zod/mini';
