import { mkdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { parseAllDocuments } from 'yaml';
import type { FlagSpec } from '../cli/flags.ts';
import type { KubeHttp } from '../runtime/kube-http.ts';
import type { KubeObject } from '../runtime/store.ts';
import type { AuditEvent } from '../testenv/control-plane.ts';
import { isolatedHelmEnv, runHelm } from '../testenv/helm.ts';

/**
 * paddock as its Helm chart installs it, on a control plane without a kubelet: `helm install` of
 * charts/paddock, then each Deployment's container started as a local process with the chart's own
 * arguments and environment and its ServiceAccount's token, so every request paddock makes is
 * checked against the chart's RBAC. Only listen addresses are changed (no Service routing here).
 */

export interface ChartRelease {
  name: string;
  namespace: string;
  /** Every object the release rendered (`helm get manifest`). */
  objects: KubeObject[];
  helm: (args: string[]) => Promise<string>;
}

export async function installChart(opts: {
  helmBinary: string;
  chartDir: string;
  kubeconfigPath: string;
  /** Helm's cache, config and data go here, never to the user's own. */
  workDir: string;
  release: string;
  namespace: string;
  /** `--set` arguments, `key=value`. */
  sets: string[];
}): Promise<ChartRelease> {
  const env = isolatedHelmEnv(opts.workDir, opts.kubeconfigPath);
  const helm = async (args: string[]) => {
    const r = await runHelm(opts.helmBinary, args, env);
    if (r.code !== 0) throw new Error(`helm ${args.join(' ')}: ${(r.stderr || r.stdout).trim()}`);
    return r.stdout;
  };
  await helm([
    'install',
    opts.release,
    opts.chartDir,
    '--namespace',
    opts.namespace,
    '--create-namespace',
    ...opts.sets.flatMap((s) => ['--set', s]),
  ]);
  const manifest = await helm(['get', 'manifest', opts.release, '--namespace', opts.namespace]);
  const objects = parseAllDocuments(manifest)
    .map((d) => d.toJSON() as KubeObject | null)
    .filter((o): o is KubeObject => !!o && typeof o === 'object' && 'kind' in o);
  return { name: opts.release, namespace: opts.namespace, objects, helm };
}

export interface ChartContainer {
  deployment: string;
  serviceAccountName: string;
  args: string[];
  env: Record<string, string>;
}

interface ContainerSpec {
  name: string;
  args?: string[];
  command?: string[];
  env?: {
    name: string;
    value?: string;
    valueFrom?: {
      secretKeyRef?: { name: string; key: string; optional?: boolean };
      fieldRef?: { fieldPath: string };
    };
  }[];
  volumeMounts?: { name: string; mountPath: string }[];
}

interface DeploymentSpec {
  metadata: { name: string };
  spec: {
    template: {
      spec: {
        serviceAccountName?: string;
        containers: ContainerSpec[];
        volumes?: { name: string; secret?: { secretName: string; optional?: boolean } }[];
      };
    };
  };
}

/**
 * The container of the release's Deployment whose arguments start with `command` (`run` or
 * `webhook-server`), with its environment resolved as the kubelet would: literal values, the
 * downward API, and Secret keys read from the cluster. Secret volumes are written under `workDir`
 * and their mount paths rewritten in arguments and values.
 */
export async function chartContainer(
  release: ChartRelease,
  command: 'run' | 'webhook-server',
  http: KubeHttp,
  workDir: string,
): Promise<ChartContainer | undefined> {
  for (const o of release.objects) {
    if (o.kind !== 'Deployment') continue;
    const d = o as unknown as DeploymentSpec;
    const pod = d.spec.template.spec;
    const c = pod.containers.find((x) => [...(x.command ?? []), ...(x.args ?? [])].includes(command));
    if (!c) continue;
    const readSecret = async (name: string) =>
      await http
        .request<{ data?: Record<string, string> }>(
          'GET',
          `/api/v1/namespaces/${encodeURIComponent(release.namespace)}/secrets/${encodeURIComponent(name)}`,
        )
        .catch(() => undefined);
    const mounts: [string, string][] = [];
    for (const m of c.volumeMounts ?? []) {
      const secretName = pod.volumes?.find((v) => v.name === m.name)?.secret?.secretName;
      if (!secretName) continue;
      const dir = path.join(workDir, 'volumes', d.metadata.name, m.name);
      await mkdir(dir, { recursive: true, mode: 0o700 });
      for (const [k, v] of Object.entries((await readSecret(secretName))?.data ?? {})) {
        await writeFile(path.join(dir, k), Buffer.from(v, 'base64'), { mode: 0o600 });
      }
      mounts.push([m.mountPath.replace(/\/+$/, ''), dir]);
    }
    const local = (s: string) => mounts.reduce((acc, [from, to]) => acc.split(from).join(to), s);
    const env: Record<string, string> = {};
    for (const e of c.env ?? []) {
      if (e.value !== undefined) env[e.name] = local(e.value);
      const ref = e.valueFrom?.secretKeyRef;
      if (ref) {
        const data = (await readSecret(ref.name))?.data?.[ref.key];
        if (data !== undefined) env[e.name] = Buffer.from(data, 'base64').toString('utf8');
        else if (!ref.optional)
          throw new Error(`${d.metadata.name}: Secret ${ref.name} has no key ${ref.key}`);
      }
      const field = e.valueFrom?.fieldRef?.fieldPath;
      if (field === 'metadata.namespace') env[e.name] = release.namespace;
      else if (field === 'metadata.name') env[e.name] = `${d.metadata.name}-sandbox`;
      else if (field === 'spec.serviceAccountName') env[e.name] = pod.serviceAccountName ?? 'default';
    }
    const argv = [...(c.command ?? []), ...(c.args ?? [])];
    return {
      deployment: d.metadata.name,
      serviceAccountName: pod.serviceAccountName ?? 'default',
      args: argv.slice(argv.indexOf(command)).map(local),
      env,
    };
  }
  return undefined;
}

/** `args` without the flags named (by name or alias), in `--flag value`, `--flag=value` or boolean form. */
export function withoutFlags(args: string[], specs: FlagSpec[], names: string[]): string[] {
  const drop = new Map<string, FlagSpec>();
  for (const s of specs) {
    if (!names.includes(s.name)) continue;
    for (const n of [s.name, ...(s.aliases ?? [])]) drop.set(n, s);
  }
  const out: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const a = args[i]!;
    const m = /^--([^=]+)(=.*)?$/.exec(a);
    const spec = m ? drop.get(m[1]!) : undefined;
    if (!spec) {
      out.push(a);
      continue;
    }
    if (!m![2] && spec.type !== 'boolean') i++;
  }
  return out;
}

/**
 * A chart container's arguments for a local process: the flags named in `local` (listen addresses)
 * take the values given there instead of the chart's, and --kubeconfig goes (the caller supplies a
 * ServiceAccount's).
 */
export function localArgs(args: string[], specs: FlagSpec[], local: string[]): string[] {
  const names = local.filter((a) => a.startsWith('--')).map((a) => a.slice(2));
  return [...withoutFlags(args, specs, [...names, 'kubeconfig']), ...local];
}

/** A kubeconfig that authenticates with a fresh token of the ServiceAccount (TokenRequest API). */
export async function serviceAccountKubeconfig(opts: {
  http: KubeHttp;
  server: string;
  caPath: string;
  namespace: string;
  serviceAccount: string;
  file: string;
}): Promise<string> {
  const answer = await opts.http.request<{ status: { token: string } }>(
    'POST',
    `/api/v1/namespaces/${encodeURIComponent(opts.namespace)}/serviceaccounts/${encodeURIComponent(opts.serviceAccount)}/token`,
    {
      body: {
        apiVersion: 'authentication.k8s.io/v1',
        kind: 'TokenRequest',
        spec: { expirationSeconds: 86_400 },
      },
    },
  );
  const user = `system:serviceaccount:${opts.namespace}:${opts.serviceAccount}`;
  await writeFile(
    opts.file,
    [
      'apiVersion: v1',
      'kind: Config',
      'clusters:',
      `- name: sandbox\n  cluster: {server: "${opts.server}", certificate-authority: "${opts.caPath}"}`,
      'users:',
      `- name: sa\n  user: {token: "${answer.status.token}"}`,
      'contexts:',
      `- name: sa\n  context: {cluster: sandbox, user: sa, namespace: ${opts.namespace}}`,
      'current-context: sa',
      '',
    ].join('\n'),
    { mode: 0o600 },
  );
  return user;
}

export interface RbacFigures {
  /** Requests the chart's service accounts made. */
  requests: number;
  /** Of those, answered 403. */
  forbidden: number;
  /** Up to 10 of the forbidden ones: `user verb group/resource[/sub] namespace/name`. */
  forbiddenExamples: string[];
  /** What the accounts used: `group/resource[/subresource] verb`, sorted. */
  used: string[];
}

/** Reads the API server's audit log for the requests of `users`. */
export async function rbacFigures(auditLogPath: string, users: string[]): Promise<RbacFigures> {
  const text = await readFile(auditLogPath, 'utf8').catch(() => '');
  const figures: RbacFigures = { requests: 0, forbidden: 0, forbiddenExamples: [], used: [] };
  const used = new Set<string>();
  for (const line of text.split('\n')) {
    if (!line) continue;
    let e: AuditEvent;
    try {
      e = JSON.parse(line) as AuditEvent;
    } catch {
      continue;
    }
    if (!users.includes(e.user?.username)) continue;
    figures.requests++;
    const r = e.objectRef;
    const what = r?.resource
      ? `${r.apiGroup || 'core'}/${r.resource}${r.subresource ? `/${r.subresource}` : ''}`
      : e.requestURI.split('?')[0];
    used.add(`${what} ${e.verb}`);
    if (e.responseStatus?.code === 403) {
      figures.forbidden++;
      if (figures.forbiddenExamples.length < 10)
        figures.forbiddenExamples.push(
          `${e.user.username} ${e.verb} ${what} ${r?.namespace ?? ''}/${r?.name ?? ''}`,
        );
    }
  }
  figures.used = [...used].sort();
  return figures;
}

interface PolicyRule {
  apiGroups?: string[];
  resources?: string[];
  verbs?: string[];
}

interface RoleBindingObject extends KubeObject {
  roleRef: { kind: string; name: string };
  subjects?: { kind: string; name: string; namespace?: string }[];
}

/**
 * What the release's Roles and ClusterRoles grant `users` (ServiceAccount user names), as
 * `group/resource[/subresource] verb` in the form `rbacFigures` reports use, so the two compare.
 */
export function grantedRules(objects: KubeObject[], users: string[]): string[] {
  const roles = new Map<string, PolicyRule[]>();
  for (const o of objects) {
    if (o.kind === 'Role' || o.kind === 'ClusterRole')
      roles.set(
        `${o.kind}/${o.metadata.namespace ?? ''}/${o.metadata.name}`,
        (o as { rules?: PolicyRule[] }).rules ?? [],
      );
  }
  const granted = new Set<string>();
  for (const o of objects) {
    if (o.kind !== 'RoleBinding' && o.kind !== 'ClusterRoleBinding') continue;
    const b = o as RoleBindingObject;
    const bound = (b.subjects ?? []).some(
      (s) => s.kind === 'ServiceAccount' && users.includes(`system:serviceaccount:${s.namespace}:${s.name}`),
    );
    if (!bound) continue;
    const ns = b.roleRef.kind === 'Role' ? (b.metadata.namespace ?? '') : '';
    for (const rule of roles.get(`${b.roleRef.kind}/${ns}/${b.roleRef.name}`) ?? []) {
      for (const g of rule.apiGroups ?? [])
        for (const r of rule.resources ?? [])
          for (const v of rule.verbs ?? []) granted.add(`${g || 'core'}/${r} ${v}`);
    }
  }
  return [...granted].sort();
}
