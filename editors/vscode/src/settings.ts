/**
 * The one place that maps the extension's `spanfill.*` settings onto what the server reads.
 *
 * Kept free of the `vscode` module so it can be unit-tested with `node --test` (out/test/).
 * The server reads its settings from `initializationOptions` and from
 * `workspace/didChangeConfiguration` under a `spanfill` section (server/settings.py); the
 * names below mirror that file.
 */

/** Reads one setting; `vscode.WorkspaceConfiguration.get` has this shape. */
export type Getter = <T>(key: string, fallback: T) => T;

/** How to start the server. */
export interface ServerLaunch {
  command: string;
  args: string[];
  env: Record<string, string>;
}

/**
 * The `spanfill` section as the server reads it (server/settings.py accepts these camelCase keys).
 * Every key is always sent, null meaning "server/model default", so clearing a setting in VS Code
 * resets it in the server too.
 */
export interface ServerSettings {
  model: string | null;
  device: string;
  dtype: string;
  threads: number | null;
  spanLength: number | null;
  steps: number | null;
  debounceMs: number;
  deadlineMs: number | null;
  /** languageId -> on/off; "*" covers the rest. All false while completions are toggled off. */
  enable: Record<string, boolean>;
}

export const DEFAULT_LANGUAGES = ["python"];

export function serverLaunch(get: Getter): ServerLaunch {
  const command = get<string>("server.command", "spanfill").trim() || "spanfill";
  return {
    command,
    args: get<string[]>("server.args", ["serve"]),
    env: get<Record<string, string>>("server.env", {}),
  };
}

export function languages(get: Getter): string[] {
  const ids = get<string[]>("languages", DEFAULT_LANGUAGES).filter((id) => id.trim() !== "");
  return ids.length > 0 ? ids : DEFAULT_LANGUAGES;
}

/** Positive integer, or null for "use the server's or model's default" (empty or 0 in the UI). */
function optionalCount(value: number | null | undefined): number | null {
  return typeof value === "number" && Number.isInteger(value) && value > 0 ? value : null;
}

export function serverSettings(get: Getter): ServerSettings {
  const on = get<boolean>("enable", true);
  const enable: Record<string, boolean> = { "*": false };
  for (const id of languages(get)) {
    enable[id] = on;
  }
  return {
    model: get<string>("modelPath", "").trim() || null,
    device: get<string>("device", "auto"),
    dtype: get<string>("dtype", "auto"),
    threads: optionalCount(get<number | null>("threads", null)),
    spanLength: optionalCount(get<number | null>("spanLength", null)),
    steps: optionalCount(get<number | null>("steps", null)),
    debounceMs: Math.max(0, get<number>("debounceMs", 0)),
    deadlineMs: optionalCount(get<number | null>("deadlineMs", null)),
    enable,
  };
}

/** What `spanfill/status` answers (server/session.py `Session.status`); all optional, so an older or newer server still shows. */
export interface ServerStatus {
  state?: "idle" | "loading" | "ready" | "failed";
  error?: string | null;
  model?: string | null;
  family?: string | null;   // "spanfill", or a public checkpoint's family ("dream", "dreamon", "open-dcoder", "coda", "llada")
  device?: string | null;
  dtype?: string | null;
  int8Matmuls?: boolean | null;
  threads?: number | null;
  cacheHitRate?: number | null;
  latencyMs?: { count?: number; last?: number; p50?: number; p90?: number; p95?: number; p99?: number };
  accepted?: number;
  rejected?: number;
  acceptanceRate?: number | null;
}

function ms(value: number | undefined): string {
  return value === undefined ? "–" : `${Math.round(value)} ms`;
}

function percent(rate: number | null | undefined): string {
  return rate === undefined || rate === null ? "–" : `${Math.round(rate * 100)} %`;
}

/** The model's directory name: the server reports a path. */
function modelName(model: string | null | undefined): string {
  return model ? model.replace(/[\\/]+$/, "").split(/[\\/]/).pop() || model : "model?";
}

/** The model's name, with its family when it is a public checkpoint rather than spanfill's own. */
function modelLabel(status: ServerStatus): string {
  const family = status.family && status.family !== "spanfill" ? ` (${status.family})` : "";
  return modelName(status.model) + family;
}

/** Status-bar text: model, device and the last latency (the server's when it reports one, else the round trip we timed). */
export function statusText(status: ServerStatus, lastRoundTripMs: number | undefined): string {
  if (status.state === "loading" || status.state === "idle") {
    return "$(loading~spin) spanfill: loading model";
  }
  if (status.state === "failed") {
    return "$(error) spanfill: no model";
  }
  const latency = status.latencyMs?.last ?? lastRoundTripMs;
  return `$(sparkle) ${modelLabel(status)} · ${status.device ?? "device?"} · ${ms(latency)}`;
}

export function statusTooltip(status: ServerStatus): string {
  if (status.state === "failed") {
    return `spanfill could not load the model: ${status.error ?? "unknown error"}\nSee \`spanfill: Show log\`.`;
  }
  const lat = status.latencyMs ?? {};
  return [
    `model: ${status.model ?? "?"}${status.family ? ` (family: ${status.family})` : ""}`,
    `device: ${status.device ?? "?"} (${status.dtype ?? "?"}${status.int8Matmuls ? " with int8 matmuls" : ""}${status.threads ? `, ${status.threads} CPU thread${status.threads === 1 ? "" : "s"}` : ""})`,
    `typing-through cache hit rate: ${percent(status.cacheHitRate)}`,
    `latency p50 ${ms(lat.p50)}, p95 ${ms(lat.p95)}, p99 ${ms(lat.p99)} over ${lat.count ?? 0} requests`,
    // VS Code tells an extension when a suggestion is accepted, never when it is passed over: the
    // server's rejection count (and so its acceptance rate) is another client's, not this one's
    `suggestions accepted: ${status.accepted ?? 0}`,
    "",
    "Click to toggle inline completions.",
  ].join("\n");
}

/**
 * The settings layer the toggle writes `enable` to: the workspace's where it sets one (it wins over
 * the user's, so writing the user's would change nothing), else the user's. `inspect` is
 * `WorkspaceConfiguration.inspect("enable")`.
 */
export function toggleTarget(inspect: { workspaceValue?: unknown } | undefined): "workspace" | "global" {
  return inspect?.workspaceValue !== undefined ? "workspace" : "global";
}
