// Caches of things cheap to get again, kept to a size: when full, the oldest insertion goes.

/** Sets key → value; a new key in a full map first drops the map's oldest entry. */
export function setBounded<K, V>(map: Map<K, V>, key: K, value: V, max: number): void {
  if (!map.has(key) && map.size >= max) map.delete(map.keys().next().value as K);
  map.set(key, value);
}

/** Adds a value; a new one in a full set first drops the set's oldest. */
export function addBounded<V>(set: Set<V>, value: V, max: number): void {
  if (!set.has(value) && set.size >= max) set.delete(set.values().next().value as V);
  set.add(value);
}
