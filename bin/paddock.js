#!/usr/bin/env node
// The paddock command: the compiled build when present, else the TypeScript sources (Node 24
// runs them directly).
import { existsSync } from 'node:fs';

const compiled = new URL('../dist/cli/main.js', import.meta.url);
const { main } = await import(
  existsSync(compiled) ? compiled.href : new URL('../src/cli/main.ts', import.meta.url).href
);
process.exitCode = await main(process.argv.slice(2));
