/**
 * A strict reading of one JSON text. JSON.parse accepts an object with the same key twice and
 * silently keeps the last value; many log pipelines reject such lines or keep the first value.
 * `duplicateKeys` parses the text itself and reports every repeated key, at any depth, by path
 * (`$.a.b`, `$.list[2].k`). Invalid JSON throws a SyntaxError naming the offset.
 */
export function duplicateKeys(text: string): string[] {
  const found: string[] = [];
  let i = 0;
  // Raw control characters, which JSON forbids in strings, are caught by JSON.parse in `string`.
  const STRING = /"(?:[^"\\]|\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4}))*"/y;
  const LITERAL = /-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?|true|false|null/y;

  const fail = (what: string): never => {
    throw new SyntaxError(`${what} at offset ${i}`);
  };
  const space = () => {
    while (i < text.length && ' \t\n\r'.includes(text[i]!)) i++;
  };
  const token = (re: RegExp): string | undefined => {
    re.lastIndex = i;
    const m = re.exec(text);
    if (!m) return undefined;
    i += m[0].length;
    return m[0];
  };
  const expect = (c: string) => {
    space();
    if (text[i] !== c) fail(`expected '${c}'`);
    i++;
  };

  const string = (): string | undefined => {
    const raw = token(STRING);
    if (raw === undefined) return undefined;
    try {
      return JSON.parse(raw) as string;
    } catch {
      return fail('control character in a string');
    }
  };

  function value(path: string): void {
    space();
    if (text[i] === '{') object(path);
    else if (text[i] === '[') array(path);
    else if (string() === undefined && token(LITERAL) === undefined) fail('expected a value');
  }

  function object(path: string): void {
    i++;
    const seen = new Set<string>();
    space();
    if (text[i] === '}') {
      i++;
      return;
    }
    for (;;) {
      space();
      // Compared decoded, so "a" and "\u0061" are the same key.
      const key = string() ?? fail('expected a key');
      if (seen.has(key)) found.push(`${path}.${key}`);
      seen.add(key);
      expect(':');
      value(`${path}.${key}`);
      space();
      if (text[i] === '}') {
        i++;
        return;
      }
      expect(',');
    }
  }

  function array(path: string): void {
    i++;
    space();
    if (text[i] === ']') {
      i++;
      return;
    }
    for (let n = 0; ; n++) {
      value(`${path}[${n}]`);
      space();
      if (text[i] === ']') {
        i++;
        return;
      }
      expect(',');
    }
  }

  value('$');
  space();
  if (i !== text.length) fail('unexpected text after the value');
  return found;
}
