/** Unit tests for the settings mapping and status text (no VS Code needed): `npm test`. */
import { strict as assert } from "node:assert";
import { test } from "node:test";

import { Getter, languages, serverLaunch, serverSettings, statusText } from "../settings";

function getter(values: Record<string, unknown>): Getter {
  return <T>(key: string, fallback: T) => (key in values ? (values[key] as T) : fallback);
}

test("defaults start `spanfill serve` for Python with the server's defaults", () => {
  assert.deepEqual(serverLaunch(getter({})), { command: "spanfill", args: ["serve"], env: {} });
  assert.deepEqual(serverSettings(getter({})), {
    modelPath: undefined,
    device: "auto",
    spanLength: undefined,
    steps: undefined,
    debounceMs: 75,
    languages: ["python"],
  });
});

test("explicit settings reach the server under its names", () => {
  const settings = serverSettings(
    getter({ modelPath: " /m ", device: "cpu", spanLength: 24, steps: 4, debounceMs: 10, languages: ["rust"] }),
  );
  assert.deepEqual(settings, {
    modelPath: "/m",
    device: "cpu",
    spanLength: 24,
    steps: 4,
    debounceMs: 10,
    languages: ["rust"],
  });
});

test("empty or zero counts and an empty language list fall back to defaults", () => {
  const settings = serverSettings(getter({ spanLength: 0, steps: null, languages: [""] }));
  assert.equal(settings.spanLength, undefined);
  assert.equal(settings.steps, undefined);
  assert.deepEqual(languages(getter({ languages: [] })), ["python"]);
});

test("status text shows model, device and the server's last latency before our round trip", () => {
  const status = { model: "spanfill-small", device: "cpu", latencyMs: { last: 41.6 } };
  assert.equal(statusText(status, 90), "$(sparkle) spanfill-small · cpu · 42 ms");
  assert.equal(statusText({ model: "m", device: "cuda" }, 12), "$(sparkle) m · cuda · 12 ms");
});
