/**
 * Contract test against the real `spanfill serve`, without VS Code: the settings the extension sends
 * are all accepted by the server under the names it sends them, and `spanfill/status` carries the
 * fields the status bar reads. Skipped unless SPANFILL_SERVER names the spanfill executable
 * (editors/build.sh sets it when <repo>/.venv/bin/spanfill exists).
 */
import { strict as assert } from "node:assert";
import { spawn } from "node:child_process";
import { test } from "node:test";

import { StreamMessageReader, StreamMessageWriter, createMessageConnection } from "vscode-languageserver-protocol/node";

import { Getter, ServerStatus, serverSettings } from "../settings";

const server = process.env.SPANFILL_SERVER;

function getter(values: Record<string, unknown>): Getter {
  return <T>(key: string, fallback: T) => (key in values ? (values[key] as T) : fallback);
}

test(
  "the real server accepts every setting the extension sends and reports its status",
  { skip: server ? false : "set SPANFILL_SERVER=<repo>/.venv/bin/spanfill to run it", timeout: 120_000 },
  async () => {
    const child = spawn(server as string, ["serve"], { stdio: ["pipe", "pipe", "pipe"] });
    let stderr = "";
    child.stderr.on("data", (chunk) => (stderr += chunk));
    const connection = createMessageConnection(new StreamMessageReader(child.stdout), new StreamMessageWriter(child.stdin));
    const messages: string[] = [];
    connection.onNotification("window/showMessage", (params: { message: string }) => {
      messages.push(params.message);
    });
    connection.onNotification("window/logMessage", (params: { message: string }) => {
      messages.push(params.message);
    });
    connection.onNotification("$/progress", () => undefined);
    connection.onRequest("window/workDoneProgress/create", () => null);
    connection.listen();
    try {
      // Every mirrored setting away from its default. The model path does not exist: this test is
      // about names and values, so the load fails fast instead of loading a model.
      const sent = serverSettings(
        getter({ modelPath: "/nonexistent/model", device: "cpu", dtype: "fp32", spanLength: 24, steps: 4, debounceMs: 10, deadlineMs: 80, languages: ["python", "rust"] }),
      );
      await connection.sendRequest("initialize", {
        processId: process.pid,
        rootUri: null,
        capabilities: {},
        initializationOptions: { spanfill: sent },
      });
      await connection.sendNotification("initialized", {});
      await connection.sendNotification("workspace/didChangeConfiguration", { settings: { spanfill: sent } });
      const status = await connection.sendRequest<ServerStatus & { settings: Record<string, unknown> }>("spanfill/status", {});

      assert.deepEqual(messages.filter((m) => /setting/i.test(m)), [], "the server rejected a setting");
      for (const [key, value] of Object.entries(sent)) {
        assert.deepEqual(status.settings[key], value, `server setting ${key}`);
      }
      for (const key of ["state", "model", "device", "dtype", "latencyMs", "cacheHitRate", "accepted", "rejected"]) {
        assert.ok(key in status, `spanfill/status has no ${key}: ${JSON.stringify(status)}`);
      }
      await connection.sendRequest("shutdown");
      await connection.sendNotification("exit");
    } catch (error) {
      throw new Error(`${String(error)}\n--- server stderr\n${stderr.slice(-3000)}`);
    } finally {
      connection.dispose();
      child.kill();
    }
  },
);
