import { type GitHubScope, type RunnerChange, type RunnerRegistry, scopeKey } from '../github/index.ts';

/** What the interest needs of a runner registry (RunnerRegistry fits). */
export type RegistryLike = Pick<RunnerRegistry, 'subscribe' | 'keepFresh' | 'forget'>;

interface ScopeInterest {
  scope: GitHubScope;
  pods: number;
  stopKeeping: () => void;
}

interface RegistryState {
  unsubscribe: () => void;
  scopes: Map<string, ScopeInterest>;
}

/**
 * Which runner registries, and which scopes of each, runner pods currently depend on: a scope is
 * kept fresh (so runner changes wake pods up) while at least one pod of it is known, and each
 * registry is listened to once. The last pod to go releases its scope, and the last scope its
 * registry, so churned pods and rotated credentials leave nothing behind.
 */
export class RegistryInterest {
  private readonly byPod = new Map<string, { registry: RegistryLike; scope: string }>();
  private readonly registries = new Map<RegistryLike, RegistryState>();
  private readonly onChange: (change: RunnerChange) => void;

  constructor(onChange: (change: RunnerChange) => void) {
    this.onChange = onChange;
  }

  /** Pod `podKey` uses `registry` for `scope` (moves the pod there if it used another one). */
  track(podKey: string, registry: RegistryLike, scope: GitHubScope): void {
    const key = scopeKey(scope);
    const current = this.byPod.get(podKey);
    if (current?.registry === registry && current.scope === key) return;
    if (current) this.untrack(podKey);
    let state = this.registries.get(registry);
    if (!state) {
      state = { unsubscribe: registry.subscribe(this.onChange), scopes: new Map() };
      this.registries.set(registry, state);
    }
    let interest = state.scopes.get(key);
    if (!interest) {
      interest = { scope, pods: 0, stopKeeping: registry.keepFresh(scope) };
      state.scopes.set(key, interest);
    }
    interest.pods++;
    this.byPod.set(podKey, { registry, scope: key });
  }

  /** The pod is gone: release what only it needed. */
  untrack(podKey: string): void {
    const current = this.byPod.get(podKey);
    if (!current) return;
    this.byPod.delete(podKey);
    const state = this.registries.get(current.registry);
    const interest = state?.scopes.get(current.scope);
    if (!state || !interest) return;
    interest.pods--;
    if (interest.pods > 0) return;
    interest.stopKeeping();
    state.scopes.delete(current.scope);
    current.registry.forget(interest.scope);
    if (state.scopes.size === 0) {
      state.unsubscribe();
      this.registries.delete(current.registry);
    }
  }

  /** Counts, for leak checks. */
  get usage(): { pods: number; registries: number; scopes: number } {
    let scopes = 0;
    for (const s of this.registries.values()) scopes += s.scopes.size;
    return { pods: this.byPod.size, registries: this.registries.size, scopes };
  }

  stop(): void {
    for (const state of this.registries.values()) {
      for (const interest of state.scopes.values()) interest.stopKeeping();
      state.unsubscribe();
    }
    this.registries.clear();
    this.byPod.clear();
  }
}
