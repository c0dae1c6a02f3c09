// apps/bot-server: the HTTP service. Exported for tests and for embedding the server in another process.
export { buildServer, type RecoverySource, type ServerDeps } from "./app.js";
export { type BotRegistry, openBotRegistry } from "./bots.js";
export { ConfigError, ConfigSchema, loadConfig, type ServerConfig } from "./config.js";
export { ensureDataDir, loadEnvironmentId, loadServerToken } from "./data-dir.js";
export { HttpProblem, httpErrorCode, toHttpError } from "./http-errors.js";
export { type RunningServer, type StartOptions, startServer } from "./server.js";
export { checkRelativePath, WorkspacePathError, workspaceFiles } from "./workspace-files.js";
