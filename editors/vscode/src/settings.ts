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

/** The `spanfill` section as the server expects it. Absent keys mean "server default". */
export interface ServerSettings {
  modelPath?: string;
  device: string;
  spanLength?: number;
  steps?: number;
  debounceMs: number;
  languages: string[];
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

/** Positive integer, or undefined for "use the model's default" (null/empty/0 in the UI). */
function optionalCount(value: number | null | undefined): number | undefined {
  return typeof value === "number" && Number.isInteger(value) && value > 0 ? value : undefined;
}

export function serverSettings(get: Getter): ServerSettings {
  const modelPath = get<string>("modelPath", "").trim();
  return {
    modelPath: modelPath === "" ? undefined : modelPath,
    device: get<string>("device", "auto"),
    spanLength: optionalCount(get<number | null>("spanLength", null)),
    steps: optionalCount(get<number | null>("steps", null)),
    debounceMs: Math.max(0, get<number>("debounceMs", 75)),
    languages: languages(get),
  };
}

/** What `spanfill/status` answers (server/status); every field optional so an older server still shows. */
export interface ServerStatus {
  model?: string;
  device?: string;
  dtype?: string;
  cacheHitRate?: number;
  latencyMs?: { last?: number; p50?: number; p95?: number; count?: number };
}

function ms(value: number | undefined): string {
  return value === undefined ? "–" : `${Math.round(value)} ms`;
}

/** Status-bar text: model, device and the last latency (the server's, else the round trip we timed). */
export function statusText(status: ServerStatus, lastRoundTripMs: number | undefined): string {
  const latency = status.latencyMs?.last ?? lastRoundTripMs;
  const model = status.model ?? "model?";
  const device = status.device ?? "device?";
  return `$(sparkle) ${model} · ${device} · ${ms(latency)}`;
}

export function statusTooltip(status: ServerStatus): string {
  const hit = status.cacheHitRate === undefined ? "–" : `${Math.round(status.cacheHitRate * 100)} %`;
  const lat = status.latencyMs ?? {};
  return [
    `model: ${status.model ?? "?"}`,
    `device: ${status.device ?? "?"} (${status.dtype ?? "?"})`,
    `context cache hit rate: ${hit}`,
    `latency p50 ${ms(lat.p50)}, p95 ${ms(lat.p95)} over ${lat.count ?? 0} requests`,
    "",
    "Click to toggle inline completions.",
  ].join("\n");
}
