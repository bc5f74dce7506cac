// Who points to what in a world, and which objects are shares of one secret: the data behind
// the arrows' ends, a row's "← x_ptr", the highlight of a pair or of a share's siblings, and a
// crypto provider's role. Pure: a world in, maps out.

import { LOCAL, isEdge, objKey } from "../dom.js";

const hasGroup = (o) => o.group !== undefined && o.group !== null;

/**
 * The links of world `w`: {pointedBy: key -> labels of the pointers to it, pointersTo: key ->
 * keys of those pointers, namedTargets: keys a named (or held, or share) pointer points to,
 * groupKeys: share group -> keys of its entries (every lane), keyGroup: key -> its group,
 * secretName: group -> the secret's name in the notebook, providers: worker -> the secrets it
 * is the crypto provider of, groups: every entry's group in world order}. Keys are "lane:id";
 * a gone pointer points nowhere.
 */
export function worldLinks(w) {
  const pointedBy = new Map();
  const pointersTo = new Map();
  const namedTargets = new Set();
  const groupKeys = new Map();
  const keyGroup = new Map();
  const secretName = new Map();
  const providers = new Map();
  const groups = (w.workers || []).flatMap((l) => (l.objects || []).map((o) => o.group).filter((g) => g !== undefined && g !== null));
  for (const o of (w.workers || []).find((l) => l.id === LOCAL)?.objects || []) {
    const name = (o.names?.length ? o.names : o.held_in || [])[0];
    if (hasGroup(o) && !isEdge(o) && name && !secretName.has(o.group)) secretName.set(o.group, name);
    else if (o.secret && hasGroup(o) && !secretName.has(o.group)) secretName.set(o.group, o.secret);
    if (o.crypto_provider) providers.set(o.crypto_provider, [...(providers.get(o.crypto_provider) || []), name || "a shared tensor"]);
  }
  for (const lane of w.workers || []) {
    for (const o of lane.objects || []) {
      if (hasGroup(o)) {
        const k = objKey(lane.id, o.id);
        if (!groupKeys.has(o.group)) groupKeys.set(o.group, []);
        groupKeys.get(o.group).push(k);
        keyGroup.set(k, o.group);
      }
      if (!isEdge(o) || o.state === "gone") continue;
      const to = objKey(o.location, o.id_at_location);
      const secret = hasGroup(o) ? secretName.get(o.group) : undefined;
      const label = (o.names && o.names[0]) || (o.held_in && o.held_in[0]) || (secret && `${secret}'s share`)
        || o.description || (lane.id === LOCAL ? "a pointer" : `${lane.id}'s pointer`);
      if (o.names?.length || o.held_in?.length || o.group != null) namedTargets.add(to);
      if (!pointedBy.has(to)) { pointedBy.set(to, []); pointersTo.set(to, []); }
      pointedBy.get(to).push(label);
      pointersTo.get(to).push(objKey(lane.id, o.id));
    }
  }
  return { pointedBy, pointersTo, namedTargets, groupKeys, keyGroup, secretName, providers, groups };
}

/** The keys that light up with row `key` (its entry `o`): itself, a pointer's target, the
 * pointers to it, and for a share every entry of its group (and a share pointer's target).
 * `links` from worldLinks, `index` from indexWorld. */
export function litKeys(key, o, links, index) {
  const keys = [key];
  if (isEdge(o)) keys.push(objKey(o.location, o.id_at_location));
  for (const p of links.pointersTo.get(key) || []) keys.push(p);
  const g = links.keyGroup.get(key);
  if (g !== undefined) {
    for (const k of links.groupKeys.get(g) || []) {
      if (!keys.includes(k)) keys.push(k);
      const e = index.get(k)?.entry; // a share pointer's share
      if (isEdge(e)) keys.push(objKey(e.location, e.id_at_location));
    }
  }
  return keys;
}
