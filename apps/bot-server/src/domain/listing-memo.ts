import type { Bot } from "../bots.js";
import { botView, type ComputerView, type Journals, nextExpiry } from "./computer-view.js";

/** Pages kept at most (the least recently rendered one goes first): about 3 MB at 500 bots a page. */
export const LISTING_MEMO_PAGES = 64;

/** What a page of the listing was rendered from, and the bytes it came to. */
interface RenderedPage {
  /** The storage's change token read before the rows; undefined: the storage offers none. */
  token: string | undefined;
  bots: readonly Readonly<Bot>[];
  journals: Journals;
  busyVersion: number;
  nextCursor: string | null | undefined;
  /** When the first interrupted create it shows turns "older than 24 hours" (or a fence leaves its window). */
  validUntil: number;
  body: Buffer;
}

/**
 * The pages of GET /v1/bots rendered last, each keyed by its request (limit and cursor). A page's body is a
 * pure function of its bot rows, both journals' rows, which bots are busy in this process and the clock (an
 * interrupted create turns "older than 24 hours" at a known instant), and a listing is polled far more often
 * than a bot or its computer changes, so a page is re-sent while none of those changed. Two ways to know:
 *
 * - `fresh`: the storage's change token (Storage.changeToken: on sqlite its data_version and own commits, on
 *   file the documents' identities).
 *   Equal to the one read before the page was rendered, with the same bots busy: nothing it came from
 *   changed, and the page is sent without reading a row. This is what a page at 100,000 bots costs.
 * - `body`: after the rows were read (a backend without a token: postgres), the same row objects (the
 *   registry and json-journal's peeks hand out the very same frozen objects while nothing changed).
 *
 * Bodies are kept as bytes: Fastify sends a Buffer as it is, where a string is measured and encoded again
 * on every request.
 */
export class ListingMemo {
  private readonly pages = new Map<string, RenderedPage>();

  constructor(private readonly capacity = LISTING_MEMO_PAGES) {}

  /**
   * The page's body, when it was rendered under `token` with the same bots busy, and its expiry has not
   * come; else undefined (read the rows and call `body`).
   */
  fresh(key: string, token: string | undefined, busyVersion: number, now: number): Buffer | undefined {
    if (token === undefined) return undefined;
    const page = this.pages.get(key);
    return page !== undefined &&
      page.token === token &&
      page.busyVersion === busyVersion &&
      now < page.validUntil
      ? page.body
      : undefined;
  }

  /**
   * The page's body, rendered again only when one of its inputs changed; remembered under `token` (read
   * before `bots` and `journals` were), so that `fresh` can answer it next time.
   */
  body(
    key: string,
    token: string | undefined,
    bots: readonly Readonly<Bot>[],
    journals: Journals,
    busyVersion: number,
    now: number,
    view: (botId: string) => ComputerView,
    /** A page's `nextCursor` (GET /v1/bots always passes one); left out of the body when not given. */
    nextCursor?: string | null,
  ): Buffer {
    let page = this.pages.get(key);
    // A page is a fresh array of the same frozen rows while nothing changed: compared row by row.
    const same =
      page !== undefined &&
      page.bots.length === bots.length &&
      page.bots.every((b, i) => b === bots[i]) &&
      page.nextCursor === nextCursor &&
      page.journals === journals &&
      page.busyVersion === busyVersion &&
      now < page.validUntil;
    if (page === undefined || !same) {
      const rendered = {
        ok: true,
        bots: bots.map((b) => ({ ...botView(b), computer: view(b.botId) })),
        ...(nextCursor === undefined ? {} : { nextCursor }),
      };
      page = {
        token,
        bots,
        journals,
        busyVersion,
        nextCursor,
        validUntil: nextExpiry(journals, now),
        body: Buffer.from(JSON.stringify(rendered), "utf8"),
      };
    } else {
      page.token = token;
    }
    // Most recently used last, so the first key is the one to drop.
    this.pages.delete(key);
    this.pages.set(key, page);
    if (this.pages.size > this.capacity) this.pages.delete(this.pages.keys().next().value as string);
    return page.body;
  }
}
