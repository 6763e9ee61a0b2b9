import type { Logger } from 'pino';
import type { Clock, Timer } from '../runtime/clock.ts';
import type { KeyPairPem, WebhookCertificates } from './certs.ts';

/**
 * Keeps a long-running webhook server on valid certificates. Checking only at start-up (as ARC's
 * cert-manager-less setups did) means a paddock that runs for a year starts refusing every runner
 * pod the day its certificate expires; a periodic check reissues it well before that.
 */

export type CertificateChange = 'none' | 'serving' | 'ca';

/** What moved between two certificate sets: a new CA also means a new caBundle for the API server. */
export function certificateChange(
  current: WebhookCertificates,
  next: WebhookCertificates,
): CertificateChange {
  if (next.ca.cert !== current.ca.cert) return 'ca';
  if (next.serving.cert !== current.serving.cert || next.serving.key !== current.serving.key)
    return 'serving';
  return 'none';
}

/** The caBundle to publish while the CA changes: the new CA first, the old one still trusted. */
export function transitionCaBundle(previous: KeyPairPem, next: KeyPairPem): string {
  const pem = (s: string) => (s.endsWith('\n') ? s : `${s}\n`);
  return pem(next.cert) + pem(previous.cert);
}

export interface CertificateRenewalOptions {
  /** Reads the shared certificates, reissuing them when they are near expiry (loadOrCreateWebhookCertificates). */
  load: () => Promise<WebhookCertificates>;
  current: WebhookCertificates;
  /** New connections get the new serving certificate. */
  serve: (serving: KeyPairPem) => void;
  /** Publishes a caBundle to the API server (every webhook configuration paddock registers). */
  publishCaBundle: (caBundle: string) => Promise<unknown>;
  clock: Clock;
  intervalMs: number;
  logger: Logger;
}

export class WebhookCertificateRenewal {
  private current: WebhookCertificates;
  private timer: Timer | undefined;
  private stopped = false;
  private running: Promise<CertificateChange> | undefined;

  private readonly opts: CertificateRenewalOptions;

  constructor(opts: CertificateRenewalOptions) {
    this.opts = opts;
    this.current = opts.current;
  }

  get certificates(): WebhookCertificates {
    return this.current;
  }

  start(): void {
    this.stopped = false;
    this.schedule();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.timer?.cancel();
    this.timer = undefined;
    await this.running?.catch(() => undefined);
  }

  /** One check; a failure keeps the current certificates and is retried at the next interval. */
  async checkNow(): Promise<CertificateChange> {
    this.running ??= this.check().finally(() => {
      this.running = undefined;
    });
    return await this.running;
  }

  private schedule(): void {
    if (this.stopped) return;
    this.timer = this.opts.clock.setTimer(this.opts.intervalMs, () => {
      this.checkNow()
        .catch((err: unknown) =>
          this.opts.logger.warn(
            { err: err instanceof Error ? err.message : String(err) },
            'webhook certificates: renewal check failed; serving the current ones and retrying later',
          ),
        )
        .finally(() => this.schedule());
    });
  }

  private async check(): Promise<CertificateChange> {
    const next = await this.opts.load();
    const change = certificateChange(this.current, next);
    if (change === 'ca') {
      // Trust first, then serve: the API server must accept the new chain before it is presented.
      await this.opts.publishCaBundle(transitionCaBundle(this.current.ca, next.ca));
    }
    if (change !== 'none') {
      this.opts.serve(next.serving);
      this.current = next;
      this.opts.logger.info({ change }, 'webhook certificates renewed');
    }
    return change;
  }
}
