/**
 * @drydock/boat-provider — a typed boat.dev API v1 client. Every answer is checked by its zod schema;
 * the client never retries (whether a retry is safe is the caller's decision). The simulator lives in
 * `@drydock/boat-provider/simulator`.
 */

// Client
export {
  type BoatClient,
  type BoatClientOptions,
  type CallOptions,
  createBoatClient,
  DEFAULT_TIMEOUT_MS,
  type FetchLike,
  parseRetryAfter,
} from "./client.js";
// Errors
export {
  BOAT_ERROR_STATUS,
  BoatApiError,
  type BoatApiErrorCode,
  type BoatApiErrorInit,
  type BoatErrorCode,
  BoatTransportError,
  type BoatTransportErrorInit,
  isBoatApiError,
  isBoatTransportError,
  provesAbsence,
  SEND_REFUSED_CODE,
  SendRefusedError,
  type TransportPhase,
} from "./errors.js";
// Schemas and types
export {
  BOAT_ID,
  boatIdSchema,
  boatNameSchema,
  type CreateSandboxBody,
  type CreateSandboxResponse,
  createSandboxBodySchema,
  createSandboxResponseSchema,
  type DeletionOperation,
  type DeletionResponse,
  type DeletionStatus,
  deletionOperationSchema,
  deletionResponseSchema,
  deletionStatusSchema,
  type ErrorEnvelope,
  errorEnvelopeSchema,
  IDEMPOTENCY_KEY,
  idempotencyKeySchema,
  KEY_RETENTION_MS,
  type ListSandboxesQuery,
  type ListSandboxesResponse,
  listSandboxesQuerySchema,
  listSandboxesResponseSchema,
  MAX_CURSOR_LENGTH,
  MAX_LIST_LIMIT,
  OPERATION_ID,
  type OperationResponse,
  operationIdSchema,
  operationResponseSchema,
  type RenameSandboxBody,
  renameSandboxBodySchema,
  type Sandbox,
  type SandboxResponse,
  type SandboxState,
  sandboxResponseSchema,
  sandboxSchema,
  sandboxStateSchema,
} from "./schema.js";
export { classifyFetchFailure, type FailureContext } from "./transport.js";
// Walking the whole list (no page cap)
export { isRefusedCursor, type SandboxWalk, type SandboxWalkOptions, walkSandboxes } from "./walk.js";
