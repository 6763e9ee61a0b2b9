import { Counter, Gauge, type Registry } from 'prom-client';

/** What the registry age gauge reads at scrape time. */
export interface RegistryAgeSource {
  readonly credential: string;
  ages(): Iterable<{ scope: string; ageSeconds: number }>;
}

/**
 * GitHub metrics on an injected prom-client registry. ARC's gauge names are kept
 * (`github_rate_limit`, `github_rate_limit_remaining`), labelled by a non-secret credential id and
 * the rate-limit resource. Create one per registry and share it between clients.
 */
export class GitHubMetrics {
  readonly rateLimit: Gauge<'credential' | 'resource'>;
  readonly rateLimitRemaining: Gauge<'credential' | 'resource'>;
  readonly requests: Counter<'endpoint' | 'status' | 'not_modified'>;
  readonly budgetHeldBack: Counter<'credential' | 'reason'>;
  readonly registryAge: Gauge<'credential' | 'scope'>;
  readonly registryListings: Counter<'credential' | 'reason'>;
  private readonly ageSources = new Set<RegistryAgeSource>();

  constructor(registry: Registry) {
    const sources = this.ageSources;
    this.rateLimit = new Gauge({
      name: 'github_rate_limit',
      help: 'GitHub API rate limit per hour (x-ratelimit-limit), per credential and resource',
      labelNames: ['credential', 'resource'],
      registers: [registry],
    });
    this.rateLimitRemaining = new Gauge({
      name: 'github_rate_limit_remaining',
      help: 'GitHub API requests left in the current window (x-ratelimit-remaining)',
      labelNames: ['credential', 'resource'],
      registers: [registry],
    });
    this.requests = new Counter({
      name: 'github_requests_total',
      help: 'GitHub API requests by route template, status, and whether a 304 answered them',
      labelNames: ['endpoint', 'status', 'not_modified'],
      registers: [registry],
    });
    this.budgetHeldBack = new Counter({
      name: 'github_requests_held_back_total',
      help: 'GitHub API requests not sent because of the rate-limit budget (reserve, exhausted, secondary)',
      labelNames: ['credential', 'reason'],
      registers: [registry],
    });
    this.registryListings = new Counter({
      name: 'github_runner_registry_listings_total',
      help:
        'Runner listings (every page, conditionally) per credential and why: first, max-age (the cached ' +
        'list expired), requested (a decision needed a list newer than an event), pages-disagreed ' +
        '(listed again at once)',
      labelNames: ['credential', 'reason'],
      registers: [registry],
    });
    this.registryAge = new Gauge({
      name: 'github_runner_registry_age_seconds',
      help: 'Age of the cached runner list per scope',
      labelNames: ['credential', 'scope'],
      registers: [registry],
      collect() {
        this.reset();
        for (const source of sources) {
          for (const { scope, ageSeconds } of source.ages()) {
            this.set({ credential: source.credential, scope }, ageSeconds);
          }
        }
      },
    });
  }

  /** Registers a source of registry ages; returns the function that removes it. */
  trackRegistry(source: RegistryAgeSource): () => void {
    this.ageSources.add(source);
    return () => this.ageSources.delete(source);
  }
}
