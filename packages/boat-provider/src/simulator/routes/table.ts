import { safeDecode } from "../http.js";

/** One row of a route table: a method, an anchored path pattern whose groups are the path parameters. */
export interface RouteEntry {
  method: string;
  pattern: RegExp;
}

export type RouteMatch<R extends RouteEntry> =
  | { route: R; params: string[] }
  /** Some route has this path, none this method (405). */
  | "method_not_allowed"
  /** No route has this path (404). */
  | "not_found";

/** The first route of `routes` for this method and path; its parameters %-decoded (a bad escape is ""). */
export function matchRoute<R extends RouteEntry>(
  routes: readonly R[],
  method: string,
  path: string,
): RouteMatch<R> {
  let pathKnown = false;
  for (const route of routes) {
    const match = route.pattern.exec(path);
    if (match === null) continue;
    pathKnown = true;
    if (route.method !== method) continue;
    return { route, params: match.slice(1).map((segment) => safeDecode(segment ?? "")) };
  }
  return pathKnown ? "method_not_allowed" : "not_found";
}
