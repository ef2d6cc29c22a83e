/**
 * A runner's events routed by key: `follow(runner, 'say', 'turnId', id, fn)` calls `fn` with each
 * `say` of turn `id`. However many follow, the runner holds one listener per event and key field
 * (a thousand jobs or calls add no listener each, so no `MaxListenersExceededWarning`).
 *
 * Invariants:
 * 1. The listener exists exactly while someone follows: added with the first follower of its event
 *    and key field, removed with the last, so a runner nobody follows holds none of ours.
 * 2. An end is idempotent and ends only its own follow (another follower of the same key keeps its
 *    own), whatever the order the follows end in.
 */

import type { TurnRunner } from './runner.js';
import type { TurnEvent, TurnRunnerEventName, TurnRunnerEvents } from './runner-events.js';

/** The field of a payload an event is routed by. */
export type RouteKey = keyof TurnEvent;

type Payload<E extends TurnRunnerEventName> = TurnRunnerEvents[E][0];

interface Route {
  readonly followers: Map<string, Set<(payload: never) => void>>;
  readonly listener: (payload: TurnEvent) => void;
}

/** Each runner's routes, by event and key field (`say:turnId`). */
const routes = new WeakMap<TurnRunner, Map<string, Route>>();

/** Call `fn` with each `event` of `runner` whose `key` field is `value`; returns the function that ends it. */
export function follow<E extends TurnRunnerEventName>(
  runner: TurnRunner, event: E, key: RouteKey, value: string, fn: (payload: Payload<E>) => void,
): () => void {
  const byName = routes.get(runner) ?? new Map<string, Route>();
  routes.set(runner, byName);
  const name = `${event}:${key}`;
  let route = byName.get(name);
  if (route === undefined) {
    const followers = new Map<string, Set<(payload: never) => void>>();
    const listener = (payload: TurnEvent): void => {
      for (const each of followers.get(payload[key]) ?? []) each(payload as never);
    };
    runner.on(event, listener as never);
    byName.set(name, route = { followers, listener });
  }
  const { followers, listener } = route;
  const mine = fn as (payload: never) => void;
  let set = followers.get(value);
  if (set === undefined) followers.set(value, set = new Set());
  set.add(mine);
  let ended = false;
  return () => {
    if (ended) return; // invariant 2
    ended = true;
    set.delete(mine);
    if (set.size > 0) return;
    followers.delete(value);
    if (followers.size > 0) return;
    runner.off(event, listener as never); // invariant 1
    byName.delete(name);
    if (byName.size === 0) routes.delete(runner);
  };
}
