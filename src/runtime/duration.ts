/**
 * A duration as people write it and as our flags accept it: `40s`, `10m`, `1m30s`, `1h5m`, `1.5s`,
 * `250ms`. Exact: messages about a configured timeout must show what was configured, not a rounding.
 */
export function formatDuration(ms: number): string {
  if (!Number.isFinite(ms)) return String(ms);
  if (ms < 0) return `-${formatDuration(-ms)}`;
  if (ms < 1000) return `${Math.round(ms)}ms`;
  const wholeSeconds = Math.floor(ms / 1000);
  const restMs = Math.round(ms - wholeSeconds * 1000);
  const h = Math.floor(wholeSeconds / 3600);
  const m = Math.floor((wholeSeconds % 3600) / 60);
  const sec = wholeSeconds % 60;
  const seconds = restMs === 0 ? `${sec}s` : `${sec}.${String(restMs).padStart(3, '0').replace(/0+$/, '')}s`;
  return [h > 0 ? `${h}h` : '', m > 0 ? `${m}m` : '', sec > 0 || restMs > 0 ? seconds : ''].join('') || '0s';
}
