/**
 * The first key that an object of a JSON text repeats, as a path ("network", "metadata.order",
 * "items[2].name"), or undefined. JSON.parse keeps the last of repeated keys and other parsers
 * the first, so two parsers in a chain could read such a body differently: it is refused.
 * Keys are compared as parsed ("a" and "\u0061" are the same key). `text` must be valid JSON.
 */
export function repeatedKey(text: string): string | undefined {
  interface Frame {
    keys: Set<string> | undefined; // an object's keys so far; undefined for an array
    expectKey: boolean;
    key: string; // the object's current key
    index: number; // the array's current element
  }
  const stack: Frame[] = [];
  const path = () =>
    stack.map((f, i) => (f.keys ? (i === 0 ? f.key : `.${f.key}`) : `[${f.index}]`)).join("");
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x22 /* " */) {
      let end = i + 1;
      while (text.charCodeAt(end) !== 0x22) end += text.charCodeAt(end) === 0x5c /* \ */ ? 2 : 1;
      const top = stack.at(-1);
      if (top?.keys && top.expectKey) {
        const key = JSON.parse(text.slice(i, end + 1)) as string;
        top.key = key;
        top.expectKey = false;
        if (top.keys.has(key)) return path();
        top.keys.add(key);
      }
      i = end;
    } else if (c === 0x7b /* { */) {
      stack.push({ keys: new Set(), expectKey: true, key: "", index: 0 });
    } else if (c === 0x5b /* [ */) {
      stack.push({ keys: undefined, expectKey: false, key: "", index: 0 });
    } else if (c === 0x7d /* } */ || c === 0x5d /* ] */) {
      stack.pop();
    } else if (c === 0x2c /* , */) {
      const top = stack.at(-1);
      if (top?.keys) top.expectKey = true;
      else if (top) top.index++;
    }
  }
  return undefined;
}
