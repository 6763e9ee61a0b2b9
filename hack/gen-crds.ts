/**
 * Generates the CRDs of `actions.summerwind.dev/v1alpha1` (config/crd/*.yaml, and the same bytes in the
 * Helm chart's charts/paddock/crds/) and their TypeScript types (src/api/generated/types.ts) from one
 * source: the schemas in src/api/schema.ts, with the Kubernetes types they embed (PodSpec, Container,
 * StatefulSetSpec, ...) inlined from the OpenAPI v3 document of a real kube-apiserver, which this script
 * starts on loopback (the pinned test control plane).
 *
 *   node hack/gen-crds.ts            regenerate everything
 *   node hack/gen-crds.ts --check    exit 1 when the committed output differs from a fresh generation
 *   --k8s-descriptions               keep the descriptions of the embedded Kubernetes types (5x larger)
 *
 * CRD schemas must be structural and cannot use $ref, so the embedded types are inlined and reduced to
 * what apiextensions accepts: no `default`s (the API server would apply them to our objects), no
 * list/map merge hints, int-or-string and Quantity as `x-kubernetes-int-or-string`.
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { stringify } from 'yaml';
import {
  GROUP,
  KINDS,
  type KindDefinition,
  QUANTITY_PATTERN,
  type Schema,
  VERSION,
} from '../src/api/schema.ts';
import { KubeHttp } from '../src/runtime/kube-http.ts';
import { KUBERNETES_VERSION, startControlPlane } from '../src/testenv/control-plane.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const CRD_DIR = path.join(root, 'config', 'crd');
/** Helm installs the CRDs of a chart's crds/ directory before its templates; test/chart.test.ts checks they match. */
const CHART_CRD_DIR = path.join(root, 'charts', 'paddock', 'crds');
const TYPES_FILE = path.join(root, 'src', 'api', 'generated', 'types.ts');

/**
 * Keep the descriptions of the embedded Kubernetes types? They make `kubectl explain` useful but are
 * most of the bytes (RunnerDeployment: 82 KiB without, 434 KiB with them); CRDs must stay well below
 * the 1.5 MiB etcd request limit, and below 256 KiB for client-side `kubectl apply`,
 * whose last-applied annotation holds the whole object. Our own descriptions are always kept.
 */
const KEEP_K8S_DESCRIPTIONS = process.argv.includes('--k8s-descriptions');

/** Formats CRD schemas accept (others are dropped). */
const CRD_FORMATS = new Set(['int32', 'int64', 'float', 'double', 'byte', 'date', 'date-time', 'duration']);

// biome-ignore lint/suspicious/noExplicitAny: OpenAPI documents are untyped JSON
type OpenAPINode = Record<string, any>;
type CrdSchema = Record<string, unknown>;

// --- OpenAPI document ----------------------------------------------------------------------------

async function fetchComponents(): Promise<Map<string, OpenAPINode>> {
  const plane = await startControlPlane({});
  const http = new KubeHttp(plane.kubeConfig);
  try {
    const components = new Map<string, OpenAPINode>();
    for (const doc of ['/openapi/v3/api/v1', '/openapi/v3/apis/apps/v1']) {
      const body = await http.request<{ components: { schemas: Record<string, OpenAPINode> } }>('GET', doc);
      for (const [name, schema] of Object.entries(body.components.schemas)) components.set(name, schema);
    }
    return components;
  } finally {
    http.close();
    await plane.stop();
  }
}

// --- Kubernetes schema -> CRD schema -------------------------------------------------------------

const INT_OR_STRING = 'io.k8s.apimachinery.pkg.util.intstr.IntOrString';
const QUANTITY = 'io.k8s.apimachinery.pkg.api.resource.Quantity';

class Inliner {
  private readonly components: Map<string, OpenAPINode>;
  constructor(components: Map<string, OpenAPINode>) {
    this.components = components;
  }

  component(name: string, stack: string[] = []): CrdSchema {
    if (stack.includes(name)) throw new Error(`recursive type ${[...stack, name].join(' -> ')}`);
    const node = this.components.get(name);
    if (!node) throw new Error(`unknown OpenAPI component ${name}`);
    if (name === INT_OR_STRING) {
      return withDescription(node, { 'x-kubernetes-int-or-string': true, anyOf: intOrString() });
    }
    if (name === QUANTITY) {
      return withDescription(node, {
        'x-kubernetes-int-or-string': true,
        anyOf: intOrString(),
        pattern: QUANTITY_PATTERN,
      });
    }
    return this.node(node, [...stack, name]);
  }

  private node(node: OpenAPINode, stack: string[]): CrdSchema {
    const ref = refOf(node);
    if (ref) {
      // `{allOf: [{$ref}], description, default}` or a bare `{$ref}`: the outer description wins.
      const inner = this.component(ref, stack);
      return node.description !== undefined && KEEP_K8S_DESCRIPTIONS
        ? { ...inner, description: node.description }
        : inner;
    }
    if (node.oneOf || node.anyOf || node.allOf) {
      throw new Error(
        `unsupported composition in ${stack.join(' -> ')}: ${JSON.stringify(node).slice(0, 200)}`,
      );
    }
    const out: CrdSchema = {};
    if (KEEP_K8S_DESCRIPTIONS && node.description !== undefined) out.description = node.description;
    if (node.type !== undefined) out.type = node.type;
    if (node.format !== undefined && CRD_FORMATS.has(node.format)) out.format = node.format;
    for (const key of [
      'enum',
      'pattern',
      'minimum',
      'maximum',
      'minLength',
      'maxLength',
      'minItems',
      'maxItems',
    ]) {
      if (node[key] !== undefined) out[key] = node[key];
    }
    if (node.properties) {
      out.properties = Object.fromEntries(
        Object.entries(node.properties as Record<string, OpenAPINode>).map(([k, v]) => [
          k,
          this.node(v, stack),
        ]),
      );
    }
    if (node.required?.length) out.required = node.required;
    if (node.items) out.items = this.node(node.items, stack);
    if (node.additionalProperties !== undefined && node.additionalProperties !== false) {
      if (node.additionalProperties === true) {
        throw new Error(
          `free-form object in ${stack.join(' -> ')}; it would need x-kubernetes-preserve-unknown-fields`,
        );
      }
      out.additionalProperties = this.node(node.additionalProperties, stack);
    }
    return out;
  }
}

function refOf(node: OpenAPINode): string | undefined {
  const direct: string | undefined = node.$ref;
  const viaAllOf: string | undefined =
    Array.isArray(node.allOf) && node.allOf.length === 1 ? node.allOf[0].$ref : undefined;
  const ref = direct ?? viaAllOf;
  return ref?.replace('#/components/schemas/', '');
}

function intOrString(): CrdSchema[] {
  return [{ type: 'integer' }, { type: 'string' }];
}

function withDescription(node: OpenAPINode, schema: CrdSchema): CrdSchema {
  return KEEP_K8S_DESCRIPTIONS && node.description ? { description: node.description, ...schema } : schema;
}

// --- our schema -> CRD schema --------------------------------------------------------------------

function toCrd(s: Schema, k8s: Inliner): CrdSchema {
  let out: CrdSchema = {};
  if (s['x-paddock-k8s']) out = k8s.component(s['x-paddock-k8s']);
  const parts = s['x-paddock-parts'] ?? [];
  if (parts.length || s.properties) {
    const properties: Record<string, CrdSchema> = {};
    const required: string[] = [];
    for (const part of parts) {
      const p = toCrd(part, k8s);
      Object.assign(properties, p.properties as Record<string, CrdSchema>);
      required.push(...((p.required as string[] | undefined) ?? []));
    }
    for (const [k, v] of Object.entries(s.properties ?? {})) properties[k] = toCrd(v, k8s);
    required.push(...(s.required ?? []));
    // No empty `properties`: the API server drops it, and a CRD that does not read back as written
    // makes another manager's server-side apply of the same file (Helm 4 installing the chart's
    // crds/ where paddock applied them) conflict on .spec.versions.
    out = { ...out, type: 'object', ...(Object.keys(properties).length ? { properties } : {}) };
    if (required.length) out.required = [...new Set(required)];
  }
  for (const [key, value] of Object.entries(s)) {
    if (key.startsWith('x-paddock-') || key === 'properties' || key === 'required') continue;
    if (key === 'items') out.items = toCrd(value as Schema, k8s);
    else if (key === 'additionalProperties') out.additionalProperties = toCrd(value as Schema, k8s);
    else if (key === 'anyOf') out.anyOf = (value as Schema[]).map((v) => toCrd(v, k8s));
    else out[key] = value;
  }
  return sortKeys(out);
}

/** Stable, readable key order: the usual JSON-schema order, then alphabetical. */
const KEY_ORDER = ['description', 'type', 'format', 'nullable', 'enum', 'pattern', 'minimum', 'anyOf'];
function sortKeys(s: CrdSchema): CrdSchema {
  const keys = Object.keys(s).sort((a, b) => {
    const ia = KEY_ORDER.indexOf(a);
    const ib = KEY_ORDER.indexOf(b);
    if (ia >= 0 || ib >= 0) return (ia < 0 ? 99 : ia) - (ib < 0 ? 99 : ib);
    return a.localeCompare(b);
  });
  return Object.fromEntries(keys.map((k) => [k, s[k]]));
}

/** The structural-schema rules we rely on; the API server would reject the CRD otherwise. */
function checkStructural(s: CrdSchema, at: string): void {
  if (s.$ref !== undefined) throw new Error(`${at}: $ref left`);
  if (s.default !== undefined) throw new Error(`${at}: default left in an embedded schema`);
  if (
    s.type === undefined &&
    !s['x-kubernetes-int-or-string'] &&
    !s['x-kubernetes-preserve-unknown-fields']
  ) {
    throw new Error(`${at}: no type`);
  }
  if (s.properties && s.additionalProperties) throw new Error(`${at}: properties and additionalProperties`);
  for (const [k, v] of Object.entries((s.properties as Record<string, CrdSchema>) ?? {})) {
    checkStructural(v, `${at}.${k}`);
  }
  if (s.items) checkStructural(s.items as CrdSchema, `${at}[]`);
  if (s.additionalProperties) checkStructural(s.additionalProperties as CrdSchema, `${at}{}`);
}

function crdFor(def: KindDefinition, k8s: Inliner): Record<string, unknown> {
  const openAPIV3Schema: CrdSchema = {
    description: def.description,
    type: 'object',
    required: ['spec'],
    properties: {
      apiVersion: { type: 'string', description: 'Versioned schema of this representation of an object.' },
      kind: { type: 'string', description: 'REST resource this object represents.' },
      metadata: { type: 'object' },
      spec: toCrd(def.spec, k8s),
      status: toCrd(def.status, k8s),
    },
  };
  checkStructural(openAPIV3Schema, def.kind);
  return {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: { name: `${def.plural}.${GROUP}` },
    spec: {
      group: GROUP,
      names: {
        kind: def.kind,
        listKind: `${def.kind}List`,
        plural: def.plural,
        singular: def.singular,
        ...(def.shortNames ? { shortNames: def.shortNames } : {}),
      },
      scope: 'Namespaced',
      versions: [
        {
          name: VERSION,
          served: true,
          storage: true,
          additionalPrinterColumns: def.printerColumns,
          schema: { openAPIV3Schema },
          subresources: { status: {}, ...(def.scale ? { scale: def.scale } : {}) },
        },
      ],
    },
  };
}

// --- TypeScript types ----------------------------------------------------------------------------

class TypeWriter {
  private readonly interfaces = new Map<string, string>();
  private readonly order: string[] = [];
  readonly k8sImports = new Set<string>();

  typeOf(s: Schema): string {
    let t: string;
    if (s['x-paddock-ts']) {
      t = s['x-paddock-ts'];
      for (const m of t.matchAll(/\bV[12]\w+/g)) this.k8sImports.add(m[0]);
    } else if (s['x-paddock-ts-name']) {
      t = this.declare(s);
    } else if (s.enum) {
      t = s.enum.map((v) => `'${v}'`).join(' | ');
    } else if (s.type === 'string') t = 'string';
    else if (s.type === 'integer' || s.type === 'number') t = 'number';
    else if (s.type === 'boolean') t = 'boolean';
    else if (s.type === 'array') {
      const item = this.typeOf(s.items ?? {});
      t = /[|&]/.test(item) ? `(${item})[]` : `${item}[]`;
    } else if (s.type === 'object' && s.additionalProperties) {
      t = `{ [key: string]: ${this.typeOf(s.additionalProperties)} }`;
    } else if (s.type === 'object') {
      t = `{ ${this.members(s).join(' ')} }`;
    } else throw new Error(`no TypeScript type for ${JSON.stringify(s).slice(0, 200)}`);
    return s.nullable ? `${t} | null` : t;
  }

  private members(s: Schema): string[] {
    const required = new Set(s.required ?? []);
    return Object.entries(s.properties ?? {}).map(([k, v]) => {
      const doc = v.description ? `/** ${v.description.replaceAll('*/', '*\\/')} */\n` : '';
      return `${doc}${k}${required.has(k) ? '' : '?'}: ${this.typeOf(v)};`;
    });
  }

  declare(s: Schema): string {
    const name = s['x-paddock-ts-name']!;
    if (this.interfaces.has(name)) return name;
    this.interfaces.set(name, '');
    const parts = (s['x-paddock-parts'] ?? []).map((p) => this.typeOf({ ...p, nullable: false }));
    const doc = s.description ? `/** ${s.description} */\n` : '';
    const ext = parts.length ? ` extends ${parts.join(', ')}` : '';
    const members = this.members(s);
    this.interfaces.set(
      name,
      members.length || parts.length
        ? `${doc}export interface ${name}${ext} {\n${members.join('\n')}\n}`
        : `${doc}export type ${name} = Record<string, never>;`,
    );
    this.order.push(name);
    return name;
  }

  resource(def: KindDefinition): void {
    const spec = this.typeOf(def.spec);
    const status = this.typeOf(def.status);
    this.interfaces.set(
      def.kind,
      `/** ${def.description} */\nexport interface ${def.kind} extends KubeObject {\n` +
        `apiVersion?: string;\nkind?: string;\nmetadata: ObjectMeta;\nspec: ${spec};\nstatus?: ${status};\n}`,
    );
    this.order.push(def.kind);
  }

  render(): string {
    const imports = [...this.k8sImports].sort();
    return [
      '// Generated by hack/gen-crds.ts from src/api/schema.ts. DO NOT EDIT.',
      `import type { ${imports.join(', ')} } from '@kubernetes/client-node';`,
      "import type { KubeObject, ObjectMeta } from '../../runtime/store.ts';",
      '',
      ...this.order.map((n) => `${this.interfaces.get(n)}\n`),
    ].join('\n');
  }
}

// --- main ----------------------------------------------------------------------------------------

interface Output {
  file: string;
  content: string;
}

function render(components: Map<string, OpenAPINode>): { outputs: Output[]; sizes: string[] } {
  const k8s = new Inliner(components);
  const outputs: Output[] = [];
  const sizes: string[] = [];
  const header =
    `# Generated by hack/gen-crds.ts from src/api/schema.ts and the OpenAPI document of\n` +
    `# Kubernetes ${KUBERNETES_VERSION}. DO NOT EDIT.\n`;
  for (const def of KINDS) {
    const crd = crdFor(def, k8s);
    const yaml = header + stringify(crd, { aliasDuplicateObjects: false, lineWidth: 0 });
    const file = path.join(CRD_DIR, `${GROUP}_${def.plural}.yaml`);
    outputs.push({ file, content: yaml });
    outputs.push({ file: path.join(CHART_CRD_DIR, path.basename(file)), content: yaml });
    sizes.push(
      `${def.kind}: ${(JSON.stringify(crd).length / 1024).toFixed(1)} KiB JSON, ${(yaml.length / 1024).toFixed(1)} KiB YAML`,
    );
  }
  const types = new TypeWriter();
  for (const def of KINDS) types.resource(def);
  outputs.push({ file: TYPES_FILE, content: types.render() });
  return { outputs, sizes };
}

/** Formats generated TypeScript with the project's Biome settings (in memory, via stdin). */
function formatTs(file: string, content: string): string {
  const biome = path.join(root, 'node_modules', '.bin', 'biome');
  const r = spawnSync(biome, ['format', `--stdin-file-path=${path.relative(root, file)}`], {
    cwd: root,
    input: content,
    encoding: 'utf8',
  });
  if (r.status !== 0) throw new Error(`biome format failed: ${r.stderr || r.stdout}`);
  return r.stdout;
}

const check = process.argv.includes('--check');
const components = await fetchComponents();
const { outputs, sizes } = render(components);
let stale = false;
for (const out of outputs) {
  const content = out.file.endsWith('.ts') ? formatTs(out.file, out.content) : out.content;
  if (check) {
    let current = '';
    try {
      current = readFileSync(out.file, 'utf8');
    } catch {}
    if (current !== content) {
      stale = true;
      process.stderr.write(`stale: ${path.relative(root, out.file)}\n`);
    }
    continue;
  }
  mkdirSync(path.dirname(out.file), { recursive: true });
  writeFileSync(out.file, content);
  process.stdout.write(`wrote ${path.relative(root, out.file)}\n`);
}
for (const line of sizes) process.stdout.write(`${line}\n`);
if (stale) process.exit(1);
