import { useCallback, useEffect, useMemo, useRef, useState } from "preact/hooks";
import {
  type Api,
  ApiError,
  type BoatActionName,
  type BoatActionPreview,
  type BoatItem,
  type Bot,
  createApi,
  type LockRow,
  type LocksGcPreview,
  type PurgePreview,
  type Readiness,
  type RecoveryReport,
  type RestoreActionName,
  type RestoreActionPreview,
  type RestoreDetail,
  type RestoreItem,
} from "./api.js";

const TOKEN_KEY = "drydock.console.token";
/** How often the page reloads itself while something is in progress (a restore running, a Boat being made). */
export const REFRESH_MS = 2_500;

function message(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

function duration(ms: number): string {
  const minutes = Math.round(ms / 60_000);
  if (minutes < 1) return `${Math.ceil(ms / 1000)} s`;
  if (minutes < 120) return `${minutes} min`;
  return `${Math.floor(minutes / 60)} h ${minutes % 60} min`;
}

export function App() {
  const [token, setToken] = useState<string | null>(() => sessionStorage.getItem(TOKEN_KEY));
  const signOut = useCallback(() => {
    sessionStorage.removeItem(TOKEN_KEY);
    setToken(null);
  }, []);
  // One client per token: the views' effects depend on it.
  const api = useMemo(() => (token === null ? null : createApi(token)), [token]);
  if (api === null) {
    return (
      <Login
        onToken={(t) => {
          sessionStorage.setItem(TOKEN_KEY, t);
          setToken(t);
        }}
      />
    );
  }
  return <Console api={api} onSignOut={signOut} />;
}

function Login({ onToken }: { onToken: (token: string) => void }) {
  const [value, setValue] = useState("");
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  async function submit(event: Event) {
    event.preventDefault();
    setBusy(true);
    setError(null);
    try {
      await createApi(value.trim()).bots();
      onToken(value.trim());
    } catch (e) {
      setError(e instanceof ApiError && e.status === 401 ? "That token is not this server's." : message(e));
    } finally {
      setBusy(false);
    }
  }
  return (
    <main class="login">
      <h1>drydock console</h1>
      <form onSubmit={submit}>
        <label for="token">Server token</label>
        <p class="hint" id="token-hint">
          The bot server's token (<code>&lt;dataDir&gt;/server-token</code>). It is kept for this tab only.
        </p>
        <input
          id="token"
          type="password"
          autocomplete="off"
          aria-describedby="token-hint"
          required
          value={value}
          onInput={(e) => setValue((e.target as HTMLInputElement).value)}
        />
        <button type="submit" disabled={busy}>
          Sign in
        </button>
        {error && (
          <p role="alert" class="error">
            {error}
          </p>
        )}
      </form>
    </main>
  );
}

interface Snapshot {
  bots: Bot[];
  recovery: RecoveryReport;
  readiness: Readiness | null;
  /** Null when the locks could not be read (the rest of the page still shows). */
  locks: LockRow[] | null;
  at: Date;
}

/** Something settles by itself: the page reloads itself until it has. */
function inProgress(snapshot: Snapshot): boolean {
  return (
    snapshot.recovery.restores.some((r) => r.inProgress) ||
    snapshot.recovery.boats.some((b) => !b.attention) ||
    snapshot.bots.some((b) => b.computer.status === "provisioning" || b.computer.status === "deleting")
  );
}

type Pending =
  | { kind: "restore"; operationId: string; action: RestoreActionName }
  | { kind: "boat"; action: BoatActionName; botId: string | null; boxId: string | null }
  | { kind: "locksGc"; action: "locks gc" }
  | { kind: "purge"; action: "restores purge"; olderThanDays: number };

function Console({ api, onSignOut }: { api: Api; onSignOut: () => void }) {
  const [snapshot, setSnapshot] = useState<Snapshot | null>(null);
  const [loadError, setLoadError] = useState<string | null>(null);
  const [selected, setSelected] = useState<string | null>(null);
  const [pending, setPending] = useState<Pending | null>(null);
  const [outcome, setOutcome] = useState<string | null>(null);
  const [filters, setFilters] = useState<Filters>({ text: "", status: "all", attentionOnly: false });

  const load = useCallback(async () => {
    try {
      const [bots, recovery, readiness, locks] = await Promise.all([
        api.bots(),
        api.recovery(),
        api.readiness().catch(() => null),
        api.locks().then(
          (answer) => answer.locks,
          () => null,
        ),
      ]);
      setSnapshot({ bots: bots.bots, recovery, readiness, locks, at: new Date() });
      setLoadError(null);
    } catch (error) {
      if (error instanceof ApiError && error.status === 401) onSignOut();
      setLoadError(message(error));
    }
  }, [api, onSignOut]);

  useEffect(() => {
    void load();
  }, [load]);
  const live = snapshot !== null && inProgress(snapshot);
  useEffect(() => {
    if (!live) return;
    const timer = setInterval(() => void load(), REFRESH_MS);
    return () => clearInterval(timer);
  }, [live, load]);

  const needle = filters.text.trim().toLowerCase();
  const matches = (...values: (string | null | undefined)[]) =>
    needle === "" || values.some((v) => v?.toLowerCase().includes(needle));

  return (
    <div class="console">
      <header>
        <h1>drydock console</h1>
        <ReadinessBadge readiness={snapshot?.readiness ?? null} />
        <p class="refresh" aria-live="polite">
          {snapshot
            ? `Updated ${snapshot.at.toLocaleTimeString()}${live ? `; refreshing every ${REFRESH_MS / 1000} s while something is in progress` : ""}`
            : "Loading…"}
        </p>
        <button type="button" onClick={() => void load()}>
          Refresh
        </button>
        <button type="button" class="secondary" onClick={onSignOut}>
          Sign out
        </button>
      </header>
      {loadError && (
        <p role="alert" class="error">
          {loadError}
        </p>
      )}
      {outcome && (
        <p role="status" class="outcome">
          {outcome}
        </p>
      )}
      {snapshot && (
        <main>
          <Counts snapshot={snapshot} />
          <FilterBar filters={filters} onChange={setFilters} />
          <Recovery
            recovery={snapshot.recovery}
            matches={matches}
            attentionOnly={filters.attentionOnly}
            onPreview={(p) => {
              setOutcome(null);
              setPending(p);
            }}
            onTimeline={setSelected}
          />
          {selected && <Timeline api={api} operationId={selected} onClose={() => setSelected(null)} />}
          <Bots
            bots={snapshot.bots.filter(
              (b) =>
                (filters.status === "all" || b.computer.status === filters.status) &&
                matches(b.botId, b.name, b.computer.boxId, b.computer.name),
            )}
            boats={snapshot.recovery.boats}
          />
          <Locks
            locks={snapshot.locks}
            onPreview={(p) => {
              setOutcome(null);
              setPending(p);
            }}
          />
        </main>
      )}
      {pending && (
        <ActionDialog
          api={api}
          pending={pending}
          onClose={() => setPending(null)}
          onApplied={(text) => {
            setPending(null);
            setOutcome(text);
            void load();
          }}
        />
      )}
    </div>
  );
}

interface Filters {
  text: string;
  status: string;
  attentionOnly: boolean;
}

const STATUSES = ["all", "ready", "provisioning", "deleting", "needs_attention", "none"];

function FilterBar({ filters, onChange }: { filters: Filters; onChange: (filters: Filters) => void }) {
  return (
    <section class="filters" aria-label="Filters">
      <label>
        Filter by bot, Boat or operation
        <input
          type="search"
          value={filters.text}
          onInput={(e) => onChange({ ...filters, text: (e.target as HTMLInputElement).value })}
        />
      </label>
      <label>
        Computer status
        <select
          value={filters.status}
          onChange={(e) => onChange({ ...filters, status: (e.target as HTMLSelectElement).value })}
        >
          {STATUSES.map((s) => (
            <option key={s} value={s}>
              {s}
            </option>
          ))}
        </select>
      </label>
      <label class="check">
        <input
          type="checkbox"
          checked={filters.attentionOnly}
          onChange={(e) => onChange({ ...filters, attentionOnly: (e.target as HTMLInputElement).checked })}
        />
        Only items that need a person
      </label>
    </section>
  );
}

function ReadinessBadge({ readiness }: { readiness: Readiness | null }) {
  if (readiness === null) return <p class="badge unknown">Readiness unknown</p>;
  const failing = Object.entries(readiness.checks).filter(([, c]) => !c.ok);
  return (
    <p
      class={`badge ${readiness.ok ? "ok" : "bad"}`}
      title={failing.map(([n, c]) => `${n}: ${c.message}`).join("\n")}
    >
      {readiness.ok ? "Ready" : `Not ready: ${failing.map(([name]) => name).join(", ")}`}
    </p>
  );
}

function Counts({ snapshot }: { snapshot: Snapshot }) {
  const byStatus = new Map<string, number>();
  for (const bot of snapshot.bots)
    byStatus.set(bot.computer.status, (byStatus.get(bot.computer.status) ?? 0) + 1);
  const { recovery } = snapshot;
  const counts: [string, number, string?][] = [
    ["Bots", snapshot.bots.length],
    ...[...byStatus.entries()]
      .sort()
      .map(([s, n]) => [`Computers ${s.replace("_", " ")}`, n] as [string, number]),
    ["Open recovery items", recovery.open, recovery.open > 0 ? "attention" : undefined],
    ["Restores in progress", recovery.restores.filter((r) => r.inProgress).length],
    ["Unreadable", recovery.unreadable.length, recovery.unreadable.length > 0 ? "attention" : undefined],
  ];
  return (
    <section aria-labelledby="counts-heading">
      <h2 id="counts-heading" class="visually-hidden">
        Counts
      </h2>
      <ul class="counts">
        {counts.map(([label, n, tone]) => (
          <li key={label} class={tone}>
            <span class="n">{n}</span> <span class="label">{label}</span>
          </li>
        ))}
      </ul>
      {!recovery.complete && (
        <ul class="unreadable">
          {recovery.unreadable.map((u) => (
            <li key={`${u.area}-${u.subject}`}>
              {u.area} {u.subject}: {u.message}
            </li>
          ))}
        </ul>
      )}
    </section>
  );
}

function restoreVerdict(item: RestoreItem): string {
  if (item.problem) return item.inProgress ? `wait: ${item.problem}` : `inspect: ${item.problem}`;
  if (item.retainedByLiveOwner) return `stop process ${item.retainedByLiveOwner.pid} first`;
  if (item.stalledForMs) return `no progress for ${duration(item.stalledForMs)}: check its process`;
  if (item.next) return `${item.next} (recommended)`;
  return item.ownerAlive ? "running: wait" : "nothing to do";
}

function Recovery(props: {
  recovery: RecoveryReport;
  matches: (...values: (string | null | undefined)[]) => boolean;
  attentionOnly: boolean;
  onPreview: (pending: Pending) => void;
  onTimeline: (operationId: string) => void;
}) {
  const { recovery, matches, attentionOnly } = props;
  const restores = recovery.restores.filter(
    (r) => (!attentionOnly || r.attention) && matches(r.botId, r.operationId),
  );
  const boats = recovery.boats.filter(
    (b) => (!attentionOnly || b.attention) && matches(b.botId, b.boxId, b.name),
  );
  return (
    <section aria-labelledby="recovery-heading">
      <h2 id="recovery-heading">Recovery items</h2>
      {restores.length === 0 && boats.length === 0 && recovery.retirements.length === 0 && (
        <p class="empty">Nothing needs a person.</p>
      )}
      <ul class="items">
        {restores.map((item) => (
          <li key={item.operationId} class="item" data-testid={`restore-${item.operationId}`}>
            <h3>
              Restore <code>{item.operationId}</code> of bot <code>{item.botId}</code>
            </h3>
            <dl>
              <dt>Phase</dt>
              <dd>
                {item.phase}
                {item.basePhase && item.basePhase !== item.phase ? ` (base ${item.basePhase})` : ""}, seq{" "}
                {item.seq}
              </dd>
              <dt>Owner</dt>
              <dd>{item.ownerAlive === null ? "none" : item.ownerAlive ? "running" : "dead"}</dd>
              <dt>Verdict</dt>
              <dd>{restoreVerdict(item)}</dd>
            </dl>
            {item.command && <Command text={item.command} />}
            <div class="actions">
              <button type="button" class="secondary" onClick={() => props.onTimeline(item.operationId)}>
                Timeline
              </button>
              {item.next && (
                <button
                  type="button"
                  onClick={() =>
                    props.onPreview({ kind: "restore", operationId: item.operationId, action: item.next! })
                  }
                >
                  Preview {item.next}
                </button>
              )}
            </div>
          </li>
        ))}
        {boats.map((item) => (
          <BoatCard
            key={`${item.kind}-${item.boxId}-${item.botId}`}
            item={item}
            onPreview={props.onPreview}
          />
        ))}
        {recovery.retirements.map((r) => (
          <li key={`retire-${r.botId}`} class="item">
            <h3>
              Workspace retirement of deleted bot <code>{r.botId}</code>
            </h3>
            <p>Unfinished; DELETE /v1/bots/{r.botId} finishes it.</p>
          </li>
        ))}
      </ul>
    </section>
  );
}

function BoatCard({ item, onPreview }: { item: BoatItem; onPreview: (p: Pending) => void }) {
  const action = item.action.name;
  return (
    <li class="item" data-testid={`boat-${item.boxId ?? item.botId}`}>
      <h3>
        {item.kind.replaceAll("_", " ")}: Boat <code>{item.boxId ?? "unknown"}</code>
        {item.botId && (
          <>
            {" "}
            of bot <code>{item.botId}</code>
          </>
        )}
      </h3>
      <p>{item.summary}</p>
      <p class="advice">{item.action.advice}</p>
      {item.facts.windowLeftMs !== undefined && (
        <p>
          Create key: {item.facts.windowLeftMs > 0 ? `${duration(item.facts.windowLeftMs)} left` : "expired"}
        </p>
      )}
      {item.action.command && <Command text={item.action.command} />}
      {action && (
        <div class="actions">
          <button
            type="button"
            onClick={() => onPreview({ kind: "boat", action, botId: item.botId, boxId: item.boxId })}
          >
            Preview {action}
          </button>
        </div>
      )}
    </li>
  );
}

function Command({ text }: { text: string }) {
  return (
    <div class="command">
      <span class="label">CLI command</span>
      <code>{text}</code>
    </div>
  );
}

function Bots({ bots, boats }: { bots: Bot[]; boats: BoatItem[] }) {
  return (
    <section aria-labelledby="bots-heading">
      <h2 id="bots-heading">Bots and their Boats</h2>
      {bots.length === 0 ? (
        <p class="empty">No bots.</p>
      ) : (
        <div class="table-wrap">
          <table>
            <thead>
              <tr>
                <th scope="col">Bot</th>
                <th scope="col">Computer</th>
                <th scope="col">Boat</th>
                <th scope="col">Create key</th>
                <th scope="col">Deletion</th>
              </tr>
            </thead>
            <tbody>
              {bots.map((bot) => {
                const mine = boats.filter((b) => b.botId === bot.botId);
                const create = mine.find((b) => b.facts.windowLeftMs !== undefined);
                const deletion = mine.find((b) => b.kind === "deletion_fence");
                return (
                  <tr key={bot.botId} data-testid={`bot-${bot.botId}`}>
                    <th scope="row">
                      {bot.name} <code>{bot.botId}</code>
                    </th>
                    <td data-label="Computer">
                      <span class={`status ${bot.computer.status}`}>
                        {bot.computer.status.replace("_", " ")}
                      </span>
                      {bot.computer.problem && <p class="problem">{bot.computer.problem}</p>}
                    </td>
                    <td data-label="Boat">
                      {bot.computer.boxId ? (
                        <>
                          <code>{bot.computer.boxId}</code> {bot.computer.name}
                        </>
                      ) : (
                        "—"
                      )}
                    </td>
                    <td data-label="Create key">
                      {create?.facts.windowLeftMs !== undefined
                        ? create.facts.windowLeftMs > 0
                          ? `${duration(create.facts.windowLeftMs)} left`
                          : "expired"
                        : "—"}
                    </td>
                    <td data-label="Deletion">
                      {deletion
                        ? `${deletion.facts.fencePhase ?? "fenced"}${deletion.facts.fenceStatus ? ` (${deletion.facts.fenceStatus})` : ""}`
                        : bot.computer.status === "deleting"
                          ? "in progress"
                          : "—"}
                    </td>
                  </tr>
                );
              })}
            </tbody>
          </table>
        </div>
      )}
    </section>
  );
}

/** What `drydock locks list` shows, and the housekeeping actions (`locks gc`, `restores purge`). */
function Locks({ locks, onPreview }: { locks: LockRow[] | null; onPreview: (p: Pending) => void }) {
  const [days, setDays] = useState("30");
  const olderThanDays = /^[0-9]{1,6}$/.test(days) ? Number(days) : null;
  return (
    <section aria-labelledby="locks-heading">
      <h2 id="locks-heading">Locks</h2>
      {locks === null ? (
        <p class="error">The lock files could not be read.</p>
      ) : locks.length === 0 ? (
        <p class="empty">No lock files.</p>
      ) : (
        <div class="table-wrap">
          <table>
            <thead>
              <tr>
                <th scope="col">Lock</th>
                <th scope="col">Kind</th>
                <th scope="col">Owner</th>
                <th scope="col">Since</th>
                <th scope="col">Restore or edit</th>
                <th scope="col">Leftovers</th>
              </tr>
            </thead>
            <tbody>
              {locks.map((lock) => (
                <LockLine key={lock.path} lock={lock} />
              ))}
            </tbody>
          </table>
        </div>
      )}
      <div class="actions">
        <button type="button" onClick={() => onPreview({ kind: "locksGc", action: "locks gc" })}>
          Preview locks gc
        </button>
        <label>
          Archived restores finished at least (days)
          <input
            type="number"
            min={0}
            inputMode="numeric"
            value={days}
            onInput={(e) => setDays((e.target as HTMLInputElement).value)}
          />
        </label>
        <button
          type="button"
          disabled={olderThanDays === null}
          onClick={() =>
            olderThanDays !== null && onPreview({ kind: "purge", action: "restores purge", olderThanDays })
          }
        >
          Preview restores purge
        </button>
      </div>
    </section>
  );
}

/** One lock file: its owner as pid, liveness and digest (never its token). */
function LockLine({ lock }: { lock: LockRow }) {
  return (
    <tr data-testid={`lock-${lock.path}`}>
      <th scope="row">
        <code>{lock.path}</code>
      </th>
      <td data-label="Kind">{lock.kind}</td>
      <td data-label="Owner">
        {lock.problem
          ? `unreadable: ${lock.problem}`
          : !lock.present
            ? "absent"
            : `pid ${lock.pid}, ${lock.alive ? "running" : "dead"}`}
        {lock.ownerDigest && (
          <>
            {" "}
            <code title={lock.ownerDigest}>{lock.ownerDigest.slice(0, 19)}…</code>
          </>
        )}
        {lock.note && <p class="advice">{lock.note}</p>}
      </td>
      <td data-label="Since">
        {lock.createdAt ? (
          <time dateTime={lock.createdAt}>{new Date(lock.createdAt).toLocaleString()}</time>
        ) : (
          "—"
        )}
      </td>
      <td data-label="Restore or edit">
        {lock.transactionId ? (
          <code>
            {lock.purpose === "workspace-edit" ? `(edit) ${lock.transactionId}` : lock.transactionId}
          </code>
        ) : (
          "—"
        )}
      </td>
      <td data-label="Leftovers">
        {lock.leftovers}
        {lock.kept > 0 ? ` (${lock.kept} kept by a running process)` : ""}
      </td>
    </tr>
  );
}

function Timeline({ api, operationId, onClose }: { api: Api; operationId: string; onClose: () => void }) {
  const [detail, setDetail] = useState<RestoreDetail | null>(null);
  const [error, setError] = useState<string | null>(null);
  const heading = useRef<HTMLHeadingElement>(null);
  useEffect(() => {
    setDetail(null);
    setError(null);
    api.restoreDetail(operationId).then(setDetail, (e) => setError(message(e)));
  }, [api, operationId]);
  useEffect(() => heading.current?.focus(), [operationId]);
  const restore = detail?.restore;
  return (
    <section class="timeline" aria-labelledby="timeline-heading">
      <h2 id="timeline-heading" tabIndex={-1} ref={heading}>
        Timeline of restore <code>{operationId}</code>
      </h2>
      <button type="button" class="secondary" onClick={onClose}>
        Close timeline
      </button>
      {error && (
        <p role="alert" class="error">
          The chain could not be verified or read: {error}
        </p>
      )}
      {restore && detail && (
        <>
          <dl>
            <dt>Bot</dt>
            <dd>
              <code>{detail.botId}</code>
            </dd>
            <dt>Chain</dt>
            <dd>
              verified ({restore.saga.events.length} events, head{" "}
              <code>{restore.saga.headHash.slice(0, 19)}…</code>)
            </dd>
            <dt>Owner</dt>
            <dd>
              {restore.owner
                ? `pid ${restore.owner.pid}, ${restore.owner.alive ? "running" : "dead"}`
                : restore.tornLock
                  ? "lock file torn by a power loss"
                  : "no lock owner"}
            </dd>
          </dl>
          <ol class="phases">
            {restore.saga.events.map((event) => (
              <li key={event.seq}>
                <span class="phase">{event.phase}</span>{" "}
                <time dateTime={event.timestamp}>
                  {event.timestamp ? new Date(event.timestamp).toLocaleString() : "no time recorded"}
                </time>
              </li>
            ))}
          </ol>
          <ul class="verdicts">
            {(["abort", "release", "complete", "rollback"] as const).map((action) => (
              <li key={action}>
                <strong>{action}</strong>:{" "}
                {restore.actions[action].eligible
                  ? `eligible${restore.recommended === action ? " (recommended)" : ""}`
                  : `not eligible (${restore.actions[action].blockers.join("; ")})`}
              </li>
            ))}
          </ul>
        </>
      )}
    </section>
  );
}

type Preview =
  | { kind: "restore"; data: RestoreActionPreview }
  | { kind: "boat"; data: BoatActionPreview }
  | { kind: "locksGc"; data: LocksGcPreview & { eligible: boolean } }
  | { kind: "purge"; data: PurgePreview & { eligible: boolean; olderThanDays: number } };

/** The server's preview of `pending` (nothing changes). */
function previewOf(api: Api, pending: Pending): Promise<Preview> {
  switch (pending.kind) {
    case "restore":
      return api
        .previewRestore(pending.operationId, pending.action)
        .then((data) => ({ kind: "restore" as const, data }));
    case "boat":
      return api
        .previewBoat(pending.action, {
          ...(pending.botId ? { botId: pending.botId } : {}),
          ...(pending.boxId ? { boxId: pending.boxId } : {}),
        })
        .then((data) => ({ kind: "boat" as const, data }));
    case "locksGc":
      return api.previewLocksGc().then((data) => ({
        kind: "locksGc" as const,
        data: { ...data, eligible: data.candidates.length > 0 },
      }));
    case "purge":
      return api.previewPurge(pending.olderThanDays).then((data) => ({
        kind: "purge" as const,
        data: { ...data, eligible: data.candidates.length > 0, olderThanDays: pending.olderThanDays },
      }));
  }
}

/**
 * Preview → confirm. The preview is the server's (the fence and the exact CLI command); apply sends that
 * fence back. A refusal (a stale fence: "state changed") is shown with the server's words, and the only way
 * on is a fresh preview: there is never a button that repeats an apply.
 */
function ActionDialog(props: {
  api: Api;
  pending: Pending;
  onClose: () => void;
  onApplied: (outcome: string) => void;
}) {
  const { api, pending } = props;
  const dialog = useRef<HTMLDialogElement>(null);
  const [preview, setPreview] = useState<Preview | null>(null);
  const [error, setError] = useState<ApiError | Error | null>(null);
  const [applying, setApplying] = useState(false);
  const [reason, setReason] = useState("");
  const [round, setRound] = useState(0);

  useEffect(() => {
    const element = dialog.current;
    if (element && !element.open) element.showModal();
  }, []);
  useEffect(() => {
    setPreview(null);
    setError(null);
    previewOf(api, pending).then(setPreview, (e) => setError(e as Error));
  }, [api, pending, round]);

  const title =
    pending.kind === "restore"
      ? `${pending.action} restore ${pending.operationId}`
      : pending.kind === "boat"
        ? `${pending.action} ${[pending.botId, pending.boxId].filter(Boolean).join(" ")}`
        : pending.kind === "purge"
          ? `${pending.action} (finished ${pending.olderThanDays} or more days ago)`
          : pending.action;

  async function apply() {
    if (!preview) return;
    setApplying(true);
    try {
      props.onApplied(await applyPreview(api, preview, reason));
    } catch (e) {
      // The preview is spent: the only way on is a fresh one (never a button that repeats the apply).
      setError(e as Error);
      setPreview(null);
    } finally {
      setApplying(false);
    }
  }

  const eligible = preview?.data.eligible ?? false;
  return (
    <dialog ref={dialog} aria-labelledby="dialog-title" onClose={props.onClose} class="action-dialog">
      <h2 id="dialog-title">Preview: {title}</h2>
      {error && (
        <div role="alert" class="error">
          <p>
            <strong>
              {error instanceof ApiError && error.code === "state_changed" ? "State changed" : "Refused"}
              {error instanceof ApiError ? ` (${error.code})` : ""}:
            </strong>{" "}
            {error.message}
          </p>
          <p>Nothing was applied. Preview again to see the state as it is now.</p>
        </div>
      )}
      {!preview && !error && <p>Reading the state…</p>}
      {preview && (
        <>
          <p>
            Nothing has changed yet. Applying sends this fence back; the server refuses it if the state moved.
          </p>
          <FenceView preview={preview} />
          {!eligible && preview.kind === "restore" && (
            <p class="error">Not possible now: {preview.data.blockers.join("; ")}</p>
          )}
          {preview.data.command && <Command text={preview.data.command} />}
          {eligible && preview.kind === "restore" && preview.data.action === "abort" && (
            <label>
              Reason (recorded in the restore's journal)
              <input
                type="text"
                value={reason}
                onInput={(e) => setReason((e.target as HTMLInputElement).value)}
              />
            </label>
          )}
        </>
      )}
      <div class="actions">
        {preview && eligible && (
          <button type="button" class="danger" disabled={applying} onClick={() => void apply()}>
            Apply {pending.action}
          </button>
        )}
        {error && (
          <button type="button" onClick={() => setRound((r) => r + 1)}>
            Preview again
          </button>
        )}
        <button type="button" class="secondary" onClick={() => dialog.current?.close()}>
          Cancel
        </button>
      </div>
    </dialog>
  );
}

/** Sends the previewed fence back; the outcome in one sentence. Throws the server's refusal. */
async function applyPreview(api: Api, preview: Preview, reason: string): Promise<string> {
  if (preview.kind === "locksGc") {
    const result = await api.applyLocksGc();
    return `Removed ${result.removed.length} garbage file(s)${result.kept.length > 0 ? `; ${result.kept.length} listed file(s) were no longer garbage and stay` : ""}.`;
  }
  if (preview.kind === "purge") {
    const { data } = preview;
    const result = await api.applyPurge({
      olderThanDays: data.olderThanDays,
      expectedState: data.stateDigest,
    });
    return `Purged ${result.purged.length} archived restore(s).`;
  }
  if (preview.kind === "restore") {
    const { data } = preview;
    const result = await api.applyRestore(data.operationId, data.action, {
      fence: data.fence,
      ...(data.action === "abort" && reason.trim() ? { reason: reason.trim() } : {}),
    });
    return `${result.action}: restore ${result.operationId} is ${result.phase} (seq ${result.seq})${result.archived ? ", archived" : ""}.`;
  }
  const { data } = preview;
  const result = await api.applyBoat(data.action, {
    ...(data.botId ? { botId: data.botId } : {}),
    ...(data.boxId ? { boxId: data.boxId } : {}),
    expectedState: data.expectedState ?? "",
  });
  return result.action === "reconcileDeletion"
    ? result.message
    : `${result.action} applied to ${result.boxId}.`;
}

/** What a `locks gc` preview lists (it has no fence: each file is judged again when applied). */
function GcFence({ candidates }: { candidates: string[] }) {
  return candidates.length === 0 ? (
    <p>No election records or candidates beside any lock, and no lock of a stopped workspace edit.</p>
  ) : (
    <>
      <p>
        {candidates.length} leftover file(s); those still provably garbage when you apply are removed (no
        fence: each is judged again then, as <code>locks gc --yes</code> does):
      </p>
      <ul class="candidates">
        {candidates.map((file) => (
          <li key={file}>
            <code>{file}</code>
          </li>
        ))}
      </ul>
    </>
  );
}

/** What a `restores purge` preview lists, and its fence (the digest of exactly that list). */
function PurgeFence({ data }: { data: PurgePreview & { olderThanDays: number } }) {
  const { candidates, kept, stateDigest } = data;
  return (
    <>
      {candidates.length === 0 ? (
        <p>No archived restore finished {data.olderThanDays} or more days ago.</p>
      ) : (
        <>
          <p>{candidates.length} archived restore(s) would be purged (events deleted, a receipt kept):</p>
          <ul class="candidates">
            {candidates.map((c) => (
              <li key={`${c.botId}/${c.operationId}`}>
                <code>
                  {c.botId}/{c.operationId}
                </code>{" "}
                {c.phase}, seq {c.seq}, finished {new Date(c.finishedAt).toLocaleString()}
              </li>
            ))}
          </ul>
        </>
      )}
      {kept.map((k) => (
        <p key={`${k.botId}/${k.operationId}`}>
          Kept {k.botId}/{k.operationId}: {k.problem}
        </p>
      ))}
      <dl class="fence" aria-label="Fence">
        <dt>--expected-state</dt>
        <dd>
          <code>{stateDigest}</code>
        </dd>
      </dl>
    </>
  );
}

/** The fence a preview returned, under the CLI's flag names (what apply sends back). */
function FenceView({ preview }: { preview: Preview }) {
  if (preview.kind === "locksGc") return <GcFence candidates={preview.data.candidates} />;
  if (preview.kind === "purge") return <PurgeFence data={preview.data} />;
  if (preview.kind === "restore") {
    const { fence } = preview.data;
    return (
      <dl class="fence" aria-label="Fence">
        <dt>--expected-seq</dt>
        <dd>{fence.expectedSeq}</dd>
        <dt>--expected-hash</dt>
        <dd>
          <code>{fence.expectedHash}</code>
        </dd>
        <dt>--expected-owner-digest</dt>
        <dd>
          <code>{fence.expectedOwnerDigest ?? "none"}</code>
        </dd>
      </dl>
    );
  }
  const { item, instead, expectedState } = preview.data;
  return (
    <>
      {item && <p>{item.summary}</p>}
      {item && <p class="advice">{item.action.advice}</p>}
      {instead && <p>The plan says instead: {instead.summary}</p>}
      <dl class="fence" aria-label="Fence">
        <dt>--expected-state</dt>
        <dd>
          <code>{expectedState ?? "none"}</code>
        </dd>
      </dl>
    </>
  );
}
