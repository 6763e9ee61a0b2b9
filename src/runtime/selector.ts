/** A Kubernetes label selector (`matchLabels` and `matchExpressions`). */
export interface LabelSelector {
  matchLabels?: Record<string, string> | null | undefined;
  matchExpressions?:
    | readonly { key: string; operator: string; values?: readonly string[] | null | undefined }[]
    | null
    | undefined;
}

/**
 * Whether `labels` satisfy `selector`, as the API server decides it: every `matchLabels` pair and
 * every expression (In, NotIn, Exists, DoesNotExist) must hold. An unknown operator matches
 * nothing (never everything), and an empty selector matches every object.
 */
export function selectorMatches(
  selector: LabelSelector,
  labels: Record<string, string> | undefined,
): boolean {
  const have = labels ?? {};
  for (const [k, v] of Object.entries(selector.matchLabels ?? {})) if (have[k] !== v) return false;
  for (const e of selector.matchExpressions ?? []) {
    const present = Object.hasOwn(have, e.key);
    const values = e.values ?? [];
    switch (e.operator) {
      case 'In':
        if (!present || !values.includes(have[e.key]!)) return false;
        break;
      case 'NotIn':
        if (present && values.includes(have[e.key]!)) return false;
        break;
      case 'Exists':
        if (!present) return false;
        break;
      case 'DoesNotExist':
        if (present) return false;
        break;
      default:
        return false;
    }
  }
  return true;
}
