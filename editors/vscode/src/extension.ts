/**
 * spanfill for VS Code: starts `spanfill serve` over stdio and lets vscode-languageclient's built-in
 * inline-completion feature (LSP 3.18 `textDocument/inlineCompletion`) draw the ghost text.
 *
 * What this file adds on top of the client: the server is started only once a document in an
 * enabled language is open (the model costs memory), settings are pushed to the server when they
 * change, a status-bar item shows model, device and last latency from `spanfill/status`, and
 * three commands: toggle, restart, show log.
 */
import * as vscode from "vscode";
import {
  DidChangeConfigurationNotification,
  LanguageClient,
  LanguageClientOptions,
  ServerOptions,
  State,
  TransportKind,
} from "vscode-languageclient/node";

import { Getter, ServerStatus, languages, serverLaunch, serverSettings, statusText, statusTooltip, toggleTarget } from "./settings";

const SECTION = "spanfill";
const STATUS_REQUEST = "spanfill/status";
/** While the model loads, ask for the status this often so the status bar flips to "ready". */
const LOADING_POLL_MS = 1000;
/** Settings whose change needs a new server process or a new document selector. */
const RESTART_KEYS = ["server", "languages"].map((key) => `${SECTION}.${key}`);

function config(): Getter {
  const cfg = vscode.workspace.getConfiguration(SECTION);
  return <T>(key: string, fallback: T) => cfg.get<T>(key, fallback);
}

function enabled(): boolean {
  return config()<boolean>("enable", true);
}

class Spanfill implements vscode.Disposable {
  private client: LanguageClient | undefined;
  private starting: Promise<void> | undefined;
  /** The server command failed to start: no retry at every document opened, until Restart or a `spanfill.server` change. */
  private startFailed = false;
  private lastRoundTripMs: number | undefined;
  private statusInFlight = false;
  private loadingPoll: NodeJS.Timeout | undefined;
  private readonly statusItem = vscode.window.createStatusBarItem(vscode.StatusBarAlignment.Right, 100);

  constructor(private readonly log: vscode.LogOutputChannel) {
    this.statusItem.command = "spanfill.toggle";
    this.showIdle();
  }

  /** Start the server if completions are on and an open document wants them. */
  async ensureStarted(): Promise<void> {
    if (this.client !== undefined || this.startFailed || !enabled()) {
      return;
    }
    const wanted = new Set(languages(config()));
    if (!vscode.workspace.textDocuments.some((doc) => wanted.has(doc.languageId))) {
      return;
    }
    this.starting ??= this.start().finally(() => (this.starting = undefined));
    return this.starting;
  }

  private async start(): Promise<void> {
    const get = config();
    const launch = serverLaunch(get);
    const serverOptions: ServerOptions = {
      command: launch.command,
      args: launch.args,
      transport: TransportKind.stdio,
      options: { env: { ...process.env, ...launch.env } },
    };
    const clientOptions: LanguageClientOptions = {
      documentSelector: languages(get).flatMap((language) => [
        { scheme: "file", language },
        { scheme: "untitled", language },
      ]),
      // A function: read again when the client restarts a crashed server, so it gets today's settings.
      initializationOptions: () => ({ [SECTION]: serverSettings(config()) }),
      outputChannel: this.log,
      middleware: {
        // The server pulls its section when a change notification comes without settings:
        // answer with the mapped names, not VS Code's raw `spanfill.*` tree.
        workspace: {
          configuration: (params, token, next) =>
            params.items.some((item) => item.section === SECTION)
              ? params.items.map((item) => (item.section === SECTION ? serverSettings(config()) : null))
              : next(params, token),
        },
        provideInlineCompletionItems: async (document, position, context, token, next) => {
          if (!enabled()) {
            return null;
          }
          const started = Date.now();
          const result = await next(document, position, context, token);
          if (!token.isCancellationRequested) {
            this.lastRoundTripMs = Date.now() - started;
            void this.refreshStatus();
          }
          return result;
        },
      },
    };
    const client = new LanguageClient(SECTION, "spanfill", serverOptions, clientOptions);
    client.onDidChangeState((event) => {
      if (this.client !== client) {
        return;      // stop() has already forgotten a client it stops
      }
      if (event.newState === State.Stopped) {       // a stop we did not ask for: a crash
        clearInterval(this.loadingPoll);
        this.loadingPoll = undefined;
        this.statusItem.text = "$(circle-slash) spanfill";
        this.statusItem.tooltip = "spanfill: server stopped. Run `spanfill: Restart server` or `spanfill: Show log`.";
      } else if (event.newState === State.Running && this.loadingPoll === undefined) {
        // also after the client restarted a crashed server, whose model loads again: the status is
        // polled until loaded (pollWhileLoading stops it), from a tick after the connection's
        // `initialized` (this event comes before the client sends it)
        this.statusItem.text = "$(loading~spin) spanfill";
        this.statusItem.tooltip = "spanfill: starting the server and loading the model";
        this.loadingPoll = setInterval(() => void this.refreshStatus(), LOADING_POLL_MS);
      }
    });
    this.client = client;
    this.statusItem.text = "$(loading~spin) spanfill";
    this.statusItem.tooltip = "spanfill: starting the server and loading the model";
    this.log.info(`starting ${launch.command} ${launch.args.join(" ")}`);
    try {
      await client.start();
    } catch (error) {
      this.client = undefined;
      this.startFailed = true;
      this.showIdle();
      const message =
        `spanfill: could not start "${launch.command} ${launch.args.join(" ")}": ${String(error)}. ` +
        "Set `spanfill.server.command` to the spanfill executable (e.g. <repo>/.venv/bin/spanfill).";
      this.log.error(message);
      void vscode.window.showErrorMessage(message, "Open Settings", "Show Log").then((choice) => {
        if (choice === "Open Settings") {
          void vscode.commands.executeCommand("workbench.action.openSettings", "spanfill.server");
        } else if (choice === "Show Log") {
          this.log.show();
        }
      });
      return;
    }
    await this.refreshStatus();
  }

  /** Send the current settings to a running server (the toggle lives in them as `enable`). */
  private async pushSettings(): Promise<void> {
    if (this.client?.isRunning()) {
      await this.client.sendNotification(DidChangeConfigurationNotification.type, {
        settings: { [SECTION]: serverSettings(config()) },
      });
      await this.refreshStatus();
    }
  }

  async stop(): Promise<void> {
    await this.starting;
    clearInterval(this.loadingPoll);
    this.loadingPoll = undefined;
    const client = this.client;
    this.client = undefined;
    this.showIdle();
    if (client !== undefined) {
      await client.stop().catch((error) => this.log.warn(`stopping the server: ${String(error)}`));
    }
  }

  async restart(): Promise<void> {
    this.startFailed = false;
    await this.stop();
    await this.ensureStarted();
  }

  async toggle(): Promise<void> {
    const now = !enabled();
    // Written where the value in effect comes from (a workspace's wins over the user's); the
    // configuration listener tells the server, or starts it.
    const config = vscode.workspace.getConfiguration(SECTION);
    const target = toggleTarget(config.inspect("enable")) === "workspace"
      ? vscode.ConfigurationTarget.Workspace : vscode.ConfigurationTarget.Global;
    await config.update("enable", now, target);
    void vscode.window.setStatusBarMessage(`spanfill inline completions ${now ? "on" : "off"}`, 2000);
  }

  async onConfigurationChanged(event: vscode.ConfigurationChangeEvent): Promise<void> {
    if (!event.affectsConfiguration(SECTION)) {
      return;
    }
    if (RESTART_KEYS.some((key) => event.affectsConfiguration(key))) {
      return this.restart();
    }
    if (this.client === undefined) {
      this.showIdle();
      return this.ensureStarted();
    }
    await this.pushSettings();
    if (!enabled()) {
      this.showIdle();
    }
  }

  private async refreshStatus(): Promise<void> {
    const client = this.client;
    if (client === undefined || !client.isRunning() || this.statusInFlight) {
      return;
    }
    if (!enabled()) {
      clearInterval(this.loadingPoll);      // nothing to show while off (a restart's poll would run on)
      this.loadingPoll = undefined;
      return this.showIdle();
    }
    this.statusInFlight = true;
    try {
      const status = await client.sendRequest<ServerStatus>(STATUS_REQUEST, {});
      this.showStatus(status);
      this.pollWhileLoading(status);
    } catch (error) {
      this.log.warn(`${STATUS_REQUEST} failed: ${String(error)}`);
    } finally {
      this.statusInFlight = false;
    }
  }

  private pollWhileLoading(status: ServerStatus): void {
    const loading = status.state === "loading" || status.state === "idle";
    if (loading && this.loadingPoll === undefined) {
      this.loadingPoll = setInterval(() => void this.refreshStatus(), LOADING_POLL_MS);
    } else if (!loading && this.loadingPoll !== undefined) {
      clearInterval(this.loadingPoll);
      this.loadingPoll = undefined;
    }
  }

  private showStatus(status: ServerStatus): void {
    if (!enabled()) {
      return this.showIdle();
    }
    this.statusItem.text = statusText(status, this.lastRoundTripMs);
    this.statusItem.tooltip = statusTooltip(status);
    this.statusItem.show();
  }

  /** No server running: say whether that is because completions are off or nothing asked yet. */
  private showIdle(): void {
    if (this.startFailed) {
      this.statusItem.text = "$(error) spanfill";
      this.statusItem.tooltip =
        "spanfill: the server did not start. Set `spanfill.server.command`, then run `spanfill: Restart server`.";
      this.statusItem.show();
      return;
    }
    const on = enabled();
    this.statusItem.text = on ? "$(sparkle) spanfill" : "$(circle-slash) spanfill";
    this.statusItem.tooltip = on
      ? `spanfill starts when a ${languages(config()).join(" / ")} file is open. Click to turn off.`
      : "spanfill inline completions are off (the server stays loaded). Click to turn on.";
    this.statusItem.show();
  }

  dispose(): void {
    this.statusItem.dispose();
  }
}

let spanfill: Spanfill | undefined;

export function activate(context: vscode.ExtensionContext): void {
  const log = vscode.window.createOutputChannel("spanfill", { log: true });
  spanfill = new Spanfill(log);
  context.subscriptions.push(
    log,
    spanfill,
    vscode.commands.registerCommand("spanfill.toggle", () => spanfill?.toggle()),
    vscode.commands.registerCommand("spanfill.restart", () => spanfill?.restart()),
    vscode.commands.registerCommand("spanfill.showLog", () => log.show()),
    vscode.workspace.onDidChangeConfiguration((event) => spanfill?.onConfigurationChanged(event)),
    vscode.workspace.onDidOpenTextDocument(() => spanfill?.ensureStarted()),
  );
  void spanfill.ensureStarted();
}

/** VS Code waits for the returned promise, so the server gets its shutdown/exit. */
export function deactivate(): Promise<void> | undefined {
  return spanfill?.stop();
}
