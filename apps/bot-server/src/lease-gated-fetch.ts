import { SendRefusedError } from "@drydock/boat-provider";
import { Agent, DecoratorHandler, type Dispatcher, fetch as undiciFetch } from "undici";
import type { InstanceLease } from "./instance-lease.js";

/** The provider calls the gate lets through unchecked: reads change nothing at boat.dev. */
const READS = new Set(["GET", "HEAD"]);

/**
 * The fetch the bot server's boat.dev client uses on a postgres store, where a server's instance lease may
 * lapse (a pause, a cut-off host). The lifecycle asks the lease's gate before each create POST and DELETE,
 * but a pause can land after that check and before the request is written: on resume the request would go
 * out from a server whose lease another instance may already have taken over. So every call that changes
 * something at boat.dev (anything but GET and HEAD) is checked again where no I/O or timer can come in
 * between: in undici's `onConnect`, which undici runs synchronously just before it writes the request to
 * the socket (and refuses to write a request aborted there). A refusal aborts with a `SendRefusedError`,
 * which the boat.dev client classifies as "not sent" (undici never announced writing it), and the lifecycle
 * then answers with the gate's own 503 `lease_lost`.
 *
 * What is left is one uninterrupted run of JavaScript from that check to the write (for a request with a
 * body, a few promise turns while undici takes its first chunk; no I/O, no timer): a pause inside it still
 * sends the request on resume, and since boat.dev takes no fencing token, no check on this side can remove
 * it. The gate is bound at dispatch to the epoch of the request that sent the call (`boundGate`): a request
 * that began before a pause never writes under a newer epoch.
 *
 * Written here on undici's own Agent and DecoratorHandler (the library's interceptor API), with undici's
 * fetch of the same version, so the handler interface always matches.
 */
export function leaseGatedFetch(
  lease: Pick<InstanceLease, "boundGate">,
  agentOptions: Agent.Options = {},
): { fetch: typeof fetch; close(): Promise<void> } {
  const agent = new Agent(agentOptions);
  const gated = agent.compose(
    (dispatch) => (options: Dispatcher.DispatchOptions, handler: Dispatcher.DispatchHandlers) =>
      READS.has(options.method)
        ? dispatch(options, handler)
        : dispatch(options, new GateAtWrite(handler, lease.boundGate())),
  );
  return {
    // undici's fetch and Response are the global ones' own implementation (Node's fetch is undici).
    fetch: ((input: string, init: RequestInit) =>
      undiciFetch(input, { ...(init as object), dispatcher: gated })) as unknown as typeof fetch,
    close: () => agent.close(),
  };
}

// undici's typings declare DecoratorHandler without its methods; at runtime it forwards every handler call.
const Forwarding = DecoratorHandler as unknown as new (
  handler: Dispatcher.DispatchHandlers,
) => Dispatcher.DispatchHandlers;

class GateAtWrite extends Forwarding {
  constructor(
    handler: Dispatcher.DispatchHandlers,
    private readonly check: () => void,
  ) {
    super(handler);
  }

  override onConnect(abort: (error?: Error) => void): void {
    // The wrapped handler (fetch's) first takes the abort it cancels with; then the gate may use it.
    super.onConnect?.(abort);
    try {
      this.check();
    } catch (refusal) {
      abort(new SendRefusedError(refusalText(refusal), { cause: refusal }));
    }
  }
}

function refusalText(refusal: unknown): string {
  return refusal instanceof Error ? refusal.message : String(refusal);
}
