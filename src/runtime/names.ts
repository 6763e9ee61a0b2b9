/**
 * Kubernetes object name rules (apimachinery's validation), for names that come from users, e.g. a
 * Secret named in an annotation, before they become part of a URL path.
 */

const DNS1123_LABEL = '[a-z0-9]([-a-z0-9]*[a-z0-9])?';
const DNS1123_SUBDOMAIN = new RegExp(`^${DNS1123_LABEL}(\\.${DNS1123_LABEL})*$`);
const DNS1123_LABEL_ONLY = new RegExp(`^${DNS1123_LABEL}$`);

/** Namespace names: a lower-case DNS-1123 label, at most 63 characters. */
export function isDns1123Label(name: string): boolean {
  return name.length > 0 && name.length <= 63 && DNS1123_LABEL_ONLY.test(name);
}

/** Secret, ConfigMap, ServiceAccount, … names: lower-case DNS-1123 subdomain, at most 253 characters. */
export function isDns1123Subdomain(name: string): boolean {
  return name.length > 0 && name.length <= 253 && DNS1123_SUBDOMAIN.test(name);
}

/** A user's string in a message: quoted and escaped (a lone surrogate too), long ones cut. */
const shown = (name: string) => JSON.stringify(name.length > 80 ? `${name.slice(0, 80)}…` : name);

/** Why `name` is not a valid object name of `what`, or undefined when it is. */
export function invalidSubdomainReason(what: string, name: string): string | undefined {
  if (isDns1123Subdomain(name)) return undefined;
  return `${what} ${shown(name)} is not a valid name: it must be a lower-case RFC 1123 subdomain (a-z, 0-9, '-' and '.', starting and ending with a letter or digit, at most 253 characters)`;
}

/** Why `name` is not a namespace name (`what` says where it came from), or undefined when it is. */
export function invalidNamespaceReason(what: string, name: string): string | undefined {
  if (isDns1123Label(name)) return undefined;
  return `${what} ${shown(name)} is not a namespace name: it must be a lower-case RFC 1123 label (a-z, 0-9 and '-', starting and ending with a letter or digit, at most 63 characters)`;
}
