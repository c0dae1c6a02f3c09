/**
 * GENERATED from the bot server's OpenAPI document by openapi-typescript: do not edit.
 * Regenerate with `pnpm --filter @drydock/console gen:api`.
 */

export interface paths {
  "/openapi.json": {
    parameters: {
      query?: never;
      header?: never;
      path?: never;
      cookie?: never;
    };
    /** This API's OpenAPI 3 document */
    get: {
      parameters: {
        query?: never;
        header?: never;
        path?: never;
        cookie?: never;
      };
      requestBody?: never;
      responses: {
        /** @description Default Response */
        200: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            "application/json": {
              openapi: string;
              paths: {
                [key: string]: unknown;
              };
            } & {
              [key: string]: unknown;
            };
          };
        };
        /** @description Default Response */
        "4XX": {
          headers: {
            [name: string]: unknown;
          };
          content: {
            "application/json": components["schemas"]["ErrorBody"];
          };
        };
        /** @description Default Response */
        "5XX": {
          headers: {
            [name: string]: unknown;
          };
          content: {
            "application/json": components["schemas"]["ErrorBody"];
          };
        };
      };
    };
    put?: never;
    post?: never;
    delete?: never;
    options?: never;
    head?: never;
    patch?: never;
    trace?: never;
  };
  "/healthz": {
    parameters: {
      query?: never;
      header?: never;
      path?: never;
      cookie?: never;
    };
    /** Liveness */
    get: {
      parameters: {
        query?: never;
        header?: never;
        path?: never;
        cookie?: never;
      };
      requestBody?: never;
      responses: {
        /** @description Default Response */
        200: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            "application/json": {
              /** @enum {boolean} */
              ok: true;
            };
          };
        };
        /** @description Default Response */
        "4XX": {
          headers: {
            [name: string]: unknown;
          };
          content: {
            "application/json": components["schemas"]["ErrorBody"];
          };
        };
        /** @description Default Response */
        "5XX": {
          headers: {
            [name: string]: unknown;
          };
          content: {
            "application/json": components["schemas"]["ErrorBody"];
          };
        };
      };
    };
    put?: never;
    post?: never;
    delete?: never;
    options?: never;
    head?: never;
    patch?: never;
    trace?: never;
  };
  "/readyz": {
    parameters: {
      query?: never;
      header?: never;
      path?: never;
      cookie?: never;
    };
    /** Readiness: storage and journals; boat.dev's reachability is reported, not required */
    get: {
      parameters: {
        query?: never;
        header?: never;
        path?: never;
        cookie?: never;
      };
      requestBody?: never;
      responses: {
        /** @description Default Response */
        200: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            "application/json": {
              ok: boolean;
              checks: {
                [key: string]: {
                  ok: boolean;
                  message?: string;
                };
              };
              provider: {
                reachable: boolean;
                message?: string;
                checkedAt: string;
              };
            };
          };
        };
        /** @description Default Response */
        503: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            "application/json": {
              ok: boolean;
              checks: {
                [key: string]: {
                  ok: boolean;
                  message?: string;
                };
              };
              provider: {
                reachable: boolean;
                message?: string;
                checkedAt: string;
              };
            };
          };
        };
        /** @description Default Response */
        "4XX": {
          headers: {
            [name: string]: unknown;
          };
          content: {
            "application/json": components["schemas"]["ErrorBody"];
          };
        };
        /** @description Default Response */
        "5XX": {
          headers: {
            [name: string]: unknown;
          };
          content: {
            "application/json": components["schemas"]["ErrorBody"];
          };
        };
      };
    };
    put?: never;
    post?: never;
    delete?: never;
    options?: never;
    head?: never;
    patch?: never;
    trace?: never;
  };
  "/metrics": {
    parameters: {
      query?: never;
      header?: never;
      path?: never;
      cookie?: never;
    };
    /** Prometheus metrics */
    get: {
      parameters: {
        query?: never;
        header?: never;
        path?: never;
        cookie?: never;
      };
      requestBody?: never;
      responses: {
        /** @description Prometheus text exposition format */
        200: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            "text/plain": string;
          };
        };
        /** @description Default Response */
        "4XX": {
          headers: {
            [name: string]: unknown;
          };
          content: {
            "application/json": components["schemas"]["ErrorBody"];
          };
        };
        /** @description Default Response */
        "5XX": {
          headers: {
            [name: string]: unknown;
          };
          content: {
            "application/json": components["schemas"]["ErrorBody"];
          };
        };
      };
    };
    put?: never;
    post?: never;
    delete?: never;
    options?: never;
    head?: never;
    patch?: never;
    trace?: never;
  };
  "/v1/bots": {
    parameters: {
      query?: never;
      header?: never;
      path?: never;
      cookie?: never;
    };
    /** List bots, each with its computer (one page, botId ascending) */
    get: {
      parameters: {
        query?: {
          limit?: number;
          cursor?: string;
        };
        header?: never;
        path?: never;
        cookie?: never;
      };
      requestBody?: never;
      responses: {
        /** @description Default Response */
        200: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            "application/json": {
              /** @enum {boolean} */
              ok: true;
              bots: ({
                botId: string;
                name: string;
                createdAt: string;
                computer: {
                  /** @enum {string} */
                  status: "none" | "provisioning" | "ready" | "deleting" | "needs_attention";
                  boxId?: string;
                  name?: string;
                } & {
                  [key: string]: unknown;
                };
              } & {
                [key: string]: unknown;
              })[];
              /** @description Pass as `cursor` for the next page; null on the last page. */
              nextCursor: string | null;
            } & {
              [key: string]: unknown;
            };
          };
        };
        /** @description Default Response */
        "4XX": {
          headers: {
            [name: string]: unknown;
          };
          content: {
            "application/json": components["schemas"]["ErrorBody"];
          };
        };
        /** @description Default Response */
        "5XX": {
          headers: {
            [name: string]: unknown;
          };
          content: {
            "application/json": components["schemas"]["ErrorBody"];
          };
        };
      };
    };
    put?: never;
    /** Create a bot */
    post: {
      parameters: {
        query?: never;
        header?: never;
        path?: never;
        cookie?: never;
      };
      requestBody: {
        content: {
          "application/json": {
            name: string;
            botId?: string;
          };
        };
      };
      responses: {
        /** @description Default Response */
        201: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            "application/json": {
              /** @enum {boolean} */
              ok: true;
              bot: {
                botId: string;
                name: string;
                createdAt: string;
              } & {
                [key: string]: unknown;
              };
            } & {
              [key: string]: unknown;
            };
          };
        };
        /** @description Default Response */
        "4XX": {
          headers: {
            [name: string]: unknown;
          };
          content: {
            "application/json": components["schemas"]["ErrorBody"];
          };
        };
        /** @description Default Response */
        "5XX": {
          headers: {
            [name: string]: unknown;
          };
          content: {
            "application/json": components["schemas"]["ErrorBody"];
          };
        };
      };
    };
    delete?: never;
    options?: never;
    head?: never;
    patch?: never;
    trace?: never;
  };
  "/v1/bots/{botId}": {
    parameters: {
      query?: never;
      header?: never;
      path?: never;
      cookie?: never;
    };
    /** One bot and its computer */
    get: {
      parameters: {
        query?: never;
        header?: never;
        path: {
          botId: string;
        };
        cookie?: never;
      };
      requestBody?: never;
      responses: {
        /** @description Default Response */
        200: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            "application/json": {
              /** @enum {boolean} */
              ok: true;
              bot: {
                botId: string;
                name: string;
                createdAt: string;
                computer: {
                  /** @enum {string} */
                  status: "none" | "provisioning" | "ready" | "deleting" | "needs_attention";
                  boxId?: string;
                  name?: string;
                } & {
                  [key: string]: unknown;
                };
              } & {
                [key: string]: unknown;
              };
            } & {
              [key: string]: unknown;
            };
          };
        };
        /** @description Default Response */
        "4XX": {
          headers: {
            [name: string]: unknown;
          };
          content: {
            "application/json": components["schemas"]["ErrorBody"];
          };
        };
        /** @description Default Response */
        "5XX": {
          headers: {
            [name: string]: unknown;
          };
          content: {
            "application/json": components["schemas"]["ErrorBody"];
          };
        };
      };
    };
    put?: never;
    post?: never;
    /** Delete a bot once its Boat is provably gone */
    delete: {
      parameters: {
        query?: never;
        header?: never;
        path: {
          botId: string;
        };
        cookie?: never;
      };
      requestBody: {
        content: {
          "application/json": {
            confirmName?: string;
          } | null;
        };
      };
      responses: {
        /** @description Default Response */
        200: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            "application/json": {
              /** @enum {boolean} */
              ok: true;
              workspaceRetired: boolean;
              warning?: string;
            } & {
              [key: string]: unknown;
            };
          };
        };
        /** @description Default Response */
        "4XX": {
          headers: {
            [name: string]: unknown;
          };
          content: {
            "application/json": components["schemas"]["ErrorBody"];
          };
        };
        /** @description Default Response */
        "5XX": {
          headers: {
            [name: string]: unknown;
          };
          content: {
            "application/json": components["schemas"]["ErrorBody"];
          };
        };
      };
    };
    options?: never;
    head?: never;
    patch?: never;
    trace?: never;
  };
  "/v1/bots/{botId}/computer": {
    parameters: {
      query?: never;
      header?: never;
      path?: never;
      cookie?: never;
    };
    /** The bot's computer (its Boat) */
    get: {
      parameters: {
        query?: never;
        header?: never;
        path: {
          botId: string;
        };
        cookie?: never;
      };
      requestBody?: never;
      responses: {
        /** @description Default Response */
        200: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            "application/json": {
              /** @enum {boolean} */
              ok: true;
              computer: {
                /** @enum {string} */
                status: "none" | "provisioning" | "ready" | "deleting" | "needs_attention";
                boxId?: string;
                name?: string;
              } & {
                [key: string]: unknown;
              };
            } & {
              [key: string]: unknown;
            };
          };
        };
        /** @description Default Response */
        "4XX": {
          headers: {
            [name: string]: unknown;
          };
          content: {
            "application/json": components["schemas"]["ErrorBody"];
          };
        };
        /** @description Default Response */
        "5XX": {
          headers: {
            [name: string]: unknown;
          };
          content: {
            "application/json": components["schemas"]["ErrorBody"];
          };
        };
      };
    };
    put?: never;
    /** Provision the bot's computer (idempotent) */
    post: {
      parameters: {
        query?: never;
        header?: never;
        path: {
          botId: string;
        };
        cookie?: never;
      };
      requestBody?: never;
      responses: {
        /** @description Default Response */
        200: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            "application/json": {
              /** @enum {boolean} */
              ok: true;
              computer: {
                /** @enum {string} */
                status: "none" | "provisioning" | "ready" | "deleting" | "needs_attention";
                boxId: string;
                name: string;
                createdThisAttempt: boolean;
              } & {
                [key: string]: unknown;
              };
            } & {
              [key: string]: unknown;
            };
          };
        };
        /** @description Default Response */
        201: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            "application/json": {
              /** @enum {boolean} */
              ok: true;
              computer: {
                /** @enum {string} */
                status: "none" | "provisioning" | "ready" | "deleting" | "needs_attention";
                boxId: string;
                name: string;
                createdThisAttempt: boolean;
              } & {
                [key: string]: unknown;
              };
            } & {
              [key: string]: unknown;
            };
          };
        };
        /** @description Default Response */
        "4XX": {
          headers: {
            [name: string]: unknown;
          };
          content: {
            "application/json": components["schemas"]["ErrorBody"];
          };
        };
        /** @description Default Response */
        "5XX": {
          headers: {
            [name: string]: unknown;
          };
          content: {
            "application/json": components["schemas"]["ErrorBody"];
          };
        };
      };
    };
    /** Delete the bot's Boat (fenced, named) */
    delete: {
      parameters: {
        query?: never;
        header?: never;
        path: {
          botId: string;
        };
        cookie?: never;
      };
      requestBody: {
        content: {
          "application/json": {
            confirmName: string;
          };
        };
      };
      responses: {
        /** @description Default Response */
        200: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            "application/json": {
              /** @enum {boolean} */
              ok: true;
            } & {
              [key: string]: unknown;
            };
          };
        };
        /** @description Default Response */
        202: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            "application/json": {
              /** @enum {boolean} */
              ok: true;
              /** @enum {boolean} */
              pending: true;
            } & {
              [key: string]: unknown;
            };
          };
        };
        /** @description Default Response */
        "4XX": {
          headers: {
            [name: string]: unknown;
          };
          content: {
            "application/json": components["schemas"]["ErrorBody"];
          };
        };
        /** @description Default Response */
        "5XX": {
          headers: {
            [name: string]: unknown;
          };
          content: {
            "application/json": components["schemas"]["ErrorBody"];
          };
        };
      };
    };
    options?: never;
    head?: never;
    patch?: never;
    trace?: never;
  };
  "/v1/computers": {
    parameters: {
      query?: never;
      header?: never;
      path?: never;
      cookie?: never;
    };
    /**
     * Sanitized inventory of every Boat, one page at a time
     * @description This installation's Boats: first those its journals know (by id), then those boat.dev lists under its names that no journal knows, in boat.dev's list order. Each page costs at most `limit` direct reads and 5 list requests to boat.dev, whatever the account's size; a page may hold fewer than `limit` Boats (even none) while `nextCursor` is not null.
     */
    get: {
      parameters: {
        query?: {
          limit?: number;
          cursor?: string;
        };
        header?: never;
        path?: never;
        cookie?: never;
      };
      requestBody?: never;
      responses: {
        /** @description Default Response */
        200: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            "application/json": {
              /** @enum {boolean} */
              ok: true;
              computers: {
                [key: string]: unknown;
              }[];
              /** @description Pass as `cursor` for the next page; null on the last page. */
              nextCursor: string | null;
            } & {
              [key: string]: unknown;
            };
          };
        };
        /** @description Default Response */
        "4XX": {
          headers: {
            [name: string]: unknown;
          };
          content: {
            "application/json": components["schemas"]["ErrorBody"];
          };
        };
        /** @description Default Response */
        "5XX": {
          headers: {
            [name: string]: unknown;
          };
          content: {
            "application/json": components["schemas"]["ErrorBody"];
          };
        };
      };
    };
    put?: never;
    post?: never;
    delete?: never;
    options?: never;
    head?: never;
    patch?: never;
    trace?: never;
  };
  "/v1/bots/{botId}/files/{path}": {
    parameters: {
      query?: never;
      header?: never;
      path?: never;
      cookie?: never;
    };
    /** Read a workspace file (raw bytes) */
    get: {
      parameters: {
        query?: never;
        header?: never;
        path: {
          botId: string;
          /** @description The file's path in the workspace (it may contain '/') */
          path: string;
        };
        cookie?: never;
      };
      requestBody?: never;
      responses: {
        /** @description The file's bytes */
        200: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            "application/octet-stream": string;
          };
        };
        /** @description Default Response */
        "4XX": {
          headers: {
            [name: string]: unknown;
          };
          content: {
            "application/json": components["schemas"]["ErrorBody"];
          };
        };
        /** @description Default Response */
        "5XX": {
          headers: {
            [name: string]: unknown;
          };
          content: {
            "application/json": components["schemas"]["ErrorBody"];
          };
        };
      };
    };
    /** Write a workspace file (raw bytes) */
    put: {
      parameters: {
        query?: never;
        header?: never;
        path: {
          botId: string;
          /** @description The file's path in the workspace (it may contain '/') */
          path: string;
        };
        cookie?: never;
      };
      requestBody: {
        content: {
          "application/octet-stream": string;
        };
      };
      responses: {
        /** @description Default Response */
        201: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            "application/json": {
              /** @enum {boolean} */
              ok: true;
              path: string;
              bytes: number;
            } & {
              [key: string]: unknown;
            };
          };
        };
        /** @description Default Response */
        "4XX": {
          headers: {
            [name: string]: unknown;
          };
          content: {
            "application/json": components["schemas"]["ErrorBody"];
          };
        };
        /** @description Default Response */
        "5XX": {
          headers: {
            [name: string]: unknown;
          };
          content: {
            "application/json": components["schemas"]["ErrorBody"];
          };
        };
      };
    };
    post?: never;
    /** Delete a workspace file */
    delete: {
      parameters: {
        query?: never;
        header?: never;
        path: {
          botId: string;
          /** @description The file's path in the workspace (it may contain '/') */
          path: string;
        };
        cookie?: never;
      };
      requestBody?: never;
      responses: {
        /** @description Default Response */
        200: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            "application/json": {
              /** @enum {boolean} */
              ok: true;
            } & {
              [key: string]: unknown;
            };
          };
        };
        /** @description Default Response */
        "4XX": {
          headers: {
            [name: string]: unknown;
          };
          content: {
            "application/json": components["schemas"]["ErrorBody"];
          };
        };
        /** @description Default Response */
        "5XX": {
          headers: {
            [name: string]: unknown;
          };
          content: {
            "application/json": components["schemas"]["ErrorBody"];
          };
        };
      };
    };
    options?: never;
    head?: never;
    patch?: never;
    trace?: never;
  };
  "/v1/bots/{botId}/checkpoints": {
    parameters: {
      query?: never;
      header?: never;
      path?: never;
      cookie?: never;
    };
    /** List the workspace's checkpoints */
    get: {
      parameters: {
        query?: never;
        header?: never;
        path: {
          botId: string;
        };
        cookie?: never;
      };
      requestBody?: never;
      responses: {
        /** @description Default Response */
        200: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            "application/json": {
              /** @enum {boolean} */
              ok: true;
              checkpoints: ({
                checkpointId: string;
                createdAt: string;
                kind?: string;
                files: number;
                bytes: number;
              } & {
                [key: string]: unknown;
              })[];
            } & {
              [key: string]: unknown;
            };
          };
        };
        /** @description Default Response */
        "4XX": {
          headers: {
            [name: string]: unknown;
          };
          content: {
            "application/json": components["schemas"]["ErrorBody"];
          };
        };
        /** @description Default Response */
        "5XX": {
          headers: {
            [name: string]: unknown;
          };
          content: {
            "application/json": components["schemas"]["ErrorBody"];
          };
        };
      };
    };
    put?: never;
    /** Snapshot the workspace */
    post: {
      parameters: {
        query?: never;
        header?: never;
        path: {
          botId: string;
        };
        cookie?: never;
      };
      requestBody?: never;
      responses: {
        /** @description Default Response */
        201: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            "application/json": {
              /** @enum {boolean} */
              ok: true;
              checkpoint: {
                checkpointId: string;
                files: number;
                bytes: number;
              } & {
                [key: string]: unknown;
              };
            } & {
              [key: string]: unknown;
            };
          };
        };
        /** @description Default Response */
        "4XX": {
          headers: {
            [name: string]: unknown;
          };
          content: {
            "application/json": components["schemas"]["ErrorBody"];
          };
        };
        /** @description Default Response */
        "5XX": {
          headers: {
            [name: string]: unknown;
          };
          content: {
            "application/json": components["schemas"]["ErrorBody"];
          };
        };
      };
    };
    delete?: never;
    options?: never;
    head?: never;
    patch?: never;
    trace?: never;
  };
  "/v1/bots/{botId}/checkpoints/{checkpointId}/restore": {
    parameters: {
      query?: never;
      header?: never;
      path?: never;
      cookie?: never;
    };
    get?: never;
    put?: never;
    /** Restore the workspace to a checkpoint (the restore saga) */
    post: {
      parameters: {
        query?: never;
        header?: never;
        path: {
          botId: string;
          checkpointId: string;
        };
        cookie?: never;
      };
      requestBody?: never;
      responses: {
        /** @description Default Response */
        200: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            "application/json": {
              /** @enum {boolean} */
              ok: true;
              operationId: string;
              phase: string;
              warning:
                | ({
                    code: string;
                    message: string;
                  } & {
                    [key: string]: unknown;
                  })
                | null;
            } & {
              [key: string]: unknown;
            };
          };
        };
        /** @description Default Response */
        "4XX": {
          headers: {
            [name: string]: unknown;
          };
          content: {
            "application/json": components["schemas"]["ErrorBody"];
          };
        };
        /** @description Default Response */
        "5XX": {
          headers: {
            [name: string]: unknown;
          };
          content: {
            "application/json": components["schemas"]["ErrorBody"];
          };
        };
      };
    };
    delete?: never;
    options?: never;
    head?: never;
    patch?: never;
    trace?: never;
  };
  "/v1/restores/{operationId}": {
    parameters: {
      query?: never;
      header?: never;
      path?: never;
      cookie?: never;
    };
    /** A restore saga's summary */
    get: {
      parameters: {
        query?: never;
        header?: never;
        path: {
          operationId: string;
        };
        cookie?: never;
      };
      requestBody?: never;
      responses: {
        /** @description Default Response */
        200: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            "application/json": {
              /** @enum {boolean} */
              ok: true;
              botId: string;
              restore: {
                operationId: string;
                phase: string;
                seq: number;
                headHash: string;
                events: ({
                  seq: number;
                  phase: string;
                  timestamp: string;
                } & {
                  [key: string]: unknown;
                })[];
              } & {
                [key: string]: unknown;
              };
            } & {
              [key: string]: unknown;
            };
          };
        };
        /** @description Default Response */
        "4XX": {
          headers: {
            [name: string]: unknown;
          };
          content: {
            "application/json": components["schemas"]["ErrorBody"];
          };
        };
        /** @description Default Response */
        "5XX": {
          headers: {
            [name: string]: unknown;
          };
          content: {
            "application/json": components["schemas"]["ErrorBody"];
          };
        };
      };
    };
    put?: never;
    post?: never;
    delete?: never;
    options?: never;
    head?: never;
    patch?: never;
    trace?: never;
  };
  "/v1/recovery": {
    parameters: {
      query?: never;
      header?: never;
      path?: never;
      cookie?: never;
    };
    /** Everything that needs a person (the same data as drydock status) */
    get: {
      parameters: {
        query?: never;
        header?: never;
        path?: never;
        cookie?: never;
      };
      requestBody?: never;
      responses: {
        /** @description Default Response */
        200: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            "application/json": {
              /** @enum {boolean} */
              ok: true;
              open: number;
              complete: boolean;
              boats: {
                /** @enum {string} */
                kind:
                  | "create_in_window"
                  | "create_expired"
                  | "create_unresolved"
                  | "create_boat_gone"
                  | "create_bot_unregistered"
                  | "deletion_fence"
                  | "unknown_boat"
                  | "unnamed_boat";
                botId: string | null;
                boxId: string | null;
                name: string | null;
                summary: string;
                facts: {
                  resolved?: boolean;
                  ageMs?: number;
                  windowLeftMs?: number;
                  /** @enum {string} */
                  fencePhase?: "prepared" | "accepted" | "blocked";
                  /** @enum {string} */
                  fenceStatus?: "pending" | "processing" | "blocked" | "completed";
                  inFlightLeftMs?: number;
                  stampedAheadMs?: number;
                  provider:
                    | {
                        /** @enum {string} */
                        kind: "present";
                        name: string | null;
                        state: string;
                      }
                    | {
                        /** @enum {string} */
                        kind: "absent";
                        status: number;
                      }
                    | {
                        /** @enum {string} */
                        kind: "unknown";
                        reason: string;
                      }
                    | {
                        /** @enum {string} */
                        kind: "not_checked";
                      };
                };
                action: {
                  name: ("adopt" | "reconcileDeletion" | "retryDeletion" | "retireCreate") | null;
                  command: string | null;
                  advice: string;
                };
                stateDigest: string;
                attention: boolean;
              }[];
              restores: {
                botId: string;
                operationId: string;
                phase: string;
                basePhase: string | null;
                seq: number;
                updatedAt: string | null;
                ownerAlive: boolean | null;
                next: ("abort" | "release" | "complete" | "rollback") | null;
                command: string | null;
                problem: string | null;
                diagnostic:
                  | ("terminal_unarchived" | "orphan_unpublished" | "busy" | "head_unsettled" | "corrupt")
                  | null;
                attention: boolean;
                inProgress: boolean;
                retainedByLiveOwner: {
                  pid: number;
                } | null;
                stalledForMs: number | null;
              }[];
              retirements: {
                botId: string;
                message: string;
              }[];
              unreadable: {
                /** @enum {string} */
                area: "restores" | "boats" | "bots";
                subject: string;
                message: string;
              }[];
              startup: {
                deletions: {
                  boxId: string;
                  ownerBotId: string | null;
                  /** @enum {string} */
                  phaseBefore: "prepared" | "accepted" | "blocked";
                  outcome: ("confirmed" | "pending" | "blocked") | "error";
                  error?: string;
                }[];
                unresolvedCreates: {
                  botId: string;
                  boxId?: string;
                  ageMs: number;
                  retryWindowLeftMs: number;
                  expired: boolean;
                }[];
                journalErrors: string[];
              } | null;
            } & {
              [key: string]: unknown;
            };
          };
        };
        /** @description Default Response */
        "4XX": {
          headers: {
            [name: string]: unknown;
          };
          content: {
            "application/json": components["schemas"]["ErrorBody"];
          };
        };
        /** @description Default Response */
        "5XX": {
          headers: {
            [name: string]: unknown;
          };
          content: {
            "application/json": components["schemas"]["ErrorBody"];
          };
        };
      };
    };
    put?: never;
    post?: never;
    delete?: never;
    options?: never;
    head?: never;
    patch?: never;
    trace?: never;
  };
  "/v1/recovery/restores/{operationId}": {
    parameters: {
      query?: never;
      header?: never;
      path?: never;
      cookie?: never;
    };
    /** A restore that needs a person: its timeline, owner, fence and the actions it allows */
    get: {
      parameters: {
        query?: never;
        header?: never;
        path: {
          operationId: string;
        };
        cookie?: never;
      };
      requestBody?: never;
      responses: {
        /** @description Default Response */
        200: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            "application/json": {
              /** @enum {boolean} */
              ok: true;
              botId: string;
              /** @enum {string} */
              chain: "verified";
              restore: {
                saga: {
                  operationId: string;
                  phase: string;
                  basePhase: string | null;
                  seq: number;
                  headHash: string;
                  terminal: boolean;
                  archived: boolean;
                  events: {
                    seq: number;
                    phase: string;
                    timestamp?: string;
                  }[];
                };
                owner: {
                  digest: string;
                  pid: number;
                  alive: boolean;
                  transactionId: string;
                } | null;
                tornLock?: {
                  digest: string;
                  path: string | null;
                  size: number;
                  changedAt: string;
                } | null;
                fence: {
                  expectedSeq: number;
                  expectedHash: string;
                  expectedOwnerDigest: string | null;
                };
                actions: {
                  abort: {
                    eligible: boolean;
                    blockers: string[];
                  };
                  release: {
                    eligible: boolean;
                    blockers: string[];
                  };
                  complete: {
                    eligible: boolean;
                    blockers: string[];
                  };
                  rollback: {
                    eligible: boolean;
                    blockers: string[];
                  };
                };
                recommended: ("abort" | "release" | "complete" | "rollback") | null;
              };
              commands: {
                abort: string | null;
                release: string | null;
                complete: string | null;
                rollback: string | null;
              };
            };
          };
        };
        /** @description Default Response */
        "4XX": {
          headers: {
            [name: string]: unknown;
          };
          content: {
            "application/json": components["schemas"]["ErrorBody"];
          };
        };
        /** @description Default Response */
        "5XX": {
          headers: {
            [name: string]: unknown;
          };
          content: {
            "application/json": components["schemas"]["ErrorBody"];
          };
        };
      };
    };
    put?: never;
    post?: never;
    delete?: never;
    options?: never;
    head?: never;
    patch?: never;
    trace?: never;
  };
  "/v1/recovery/restores/{operationId}/{action}": {
    parameters: {
      query?: never;
      header?: never;
      path?: never;
      cookie?: never;
    };
    /** Preview a restore action (abort, release, complete, rollback): its fence and CLI command */
    get: {
      parameters: {
        query?: never;
        header?: never;
        path: {
          operationId: string;
          action: "abort" | "release" | "complete" | "rollback";
        };
        cookie?: never;
      };
      requestBody?: never;
      responses: {
        /** @description Default Response */
        200: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            "application/json": {
              /** @enum {boolean} */
              ok: true;
              /** @enum {boolean} */
              preview: true;
              /** @enum {boolean} */
              changed: false;
              /** @enum {string} */
              action: "abort" | "release" | "complete" | "rollback";
              operationId: string;
              botId: string;
              eligible: boolean;
              blockers: string[];
              fence: {
                expectedSeq: number;
                expectedHash: string;
                expectedOwnerDigest: string | null;
              };
              command: string | null;
            };
          };
        };
        /** @description Default Response */
        "4XX": {
          headers: {
            [name: string]: unknown;
          };
          content: {
            "application/json": components["schemas"]["ErrorBody"];
          };
        };
        /** @description Default Response */
        "5XX": {
          headers: {
            [name: string]: unknown;
          };
          content: {
            "application/json": components["schemas"]["ErrorBody"];
          };
        };
      };
    };
    put?: never;
    /** Apply a restore action against its previewed fence (409 state_changed when it moved) */
    post: {
      parameters: {
        query?: never;
        header?: never;
        path: {
          operationId: string;
          action: "abort" | "release" | "complete" | "rollback";
        };
        cookie?: never;
      };
      requestBody: {
        content: {
          "application/json": {
            fence: {
              expectedSeq: number;
              expectedHash: string;
              expectedOwnerDigest: string | null;
            };
            reason?: string;
          };
        };
      };
      responses: {
        /** @description Default Response */
        200: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            "application/json": {
              /** @enum {boolean} */
              ok: true;
              /** @enum {string} */
              action: "abort" | "release" | "complete" | "rollback";
              operationId: string;
              phase: string;
              seq: number;
              headHash: string;
              reconciledFromError: boolean;
              archived: boolean;
              alreadyArchived: boolean;
              warning: {
                code: string;
                message: string;
                commitState: string | null;
              } | null;
            };
          };
        };
        /** @description Default Response */
        "4XX": {
          headers: {
            [name: string]: unknown;
          };
          content: {
            "application/json": components["schemas"]["ErrorBody"];
          };
        };
        /** @description Default Response */
        "5XX": {
          headers: {
            [name: string]: unknown;
          };
          content: {
            "application/json": components["schemas"]["ErrorBody"];
          };
        };
      };
    };
    delete?: never;
    options?: never;
    head?: never;
    patch?: never;
    trace?: never;
  };
  "/v1/recovery/boats/{action}": {
    parameters: {
      query?: never;
      header?: never;
      path?: never;
      cookie?: never;
    };
    /** Preview a Boat action (adopt, retireCreate, reconcileDeletion, retryDeletion) for a target */
    get: {
      parameters: {
        query?: {
          botId?: string;
          boxId?: string;
        };
        header?: never;
        path: {
          action: "adopt" | "reconcileDeletion" | "retryDeletion" | "retireCreate";
        };
        cookie?: never;
      };
      requestBody?: never;
      responses: {
        /** @description Default Response */
        200: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            "application/json": {
              /** @enum {boolean} */
              ok: true;
              /** @enum {boolean} */
              preview: true;
              /** @enum {boolean} */
              changed: false;
              /** @enum {string} */
              action: "adopt" | "reconcileDeletion" | "retryDeletion" | "retireCreate";
              botId?: string;
              boxId?: string;
              eligible: boolean;
              item: {
                /** @enum {string} */
                kind:
                  | "create_in_window"
                  | "create_expired"
                  | "create_unresolved"
                  | "create_boat_gone"
                  | "create_bot_unregistered"
                  | "deletion_fence"
                  | "unknown_boat"
                  | "unnamed_boat";
                botId: string | null;
                boxId: string | null;
                name: string | null;
                summary: string;
                facts: {
                  resolved?: boolean;
                  ageMs?: number;
                  windowLeftMs?: number;
                  /** @enum {string} */
                  fencePhase?: "prepared" | "accepted" | "blocked";
                  /** @enum {string} */
                  fenceStatus?: "pending" | "processing" | "blocked" | "completed";
                  inFlightLeftMs?: number;
                  stampedAheadMs?: number;
                  provider:
                    | {
                        /** @enum {string} */
                        kind: "present";
                        name: string | null;
                        state: string;
                      }
                    | {
                        /** @enum {string} */
                        kind: "absent";
                        status: number;
                      }
                    | {
                        /** @enum {string} */
                        kind: "unknown";
                        reason: string;
                      }
                    | {
                        /** @enum {string} */
                        kind: "not_checked";
                      };
                };
                action: {
                  name: ("adopt" | "reconcileDeletion" | "retryDeletion" | "retireCreate") | null;
                  command: string | null;
                  advice: string;
                };
                stateDigest: string;
              } | null;
              instead: {
                /** @enum {string} */
                kind:
                  | "create_in_window"
                  | "create_expired"
                  | "create_unresolved"
                  | "create_boat_gone"
                  | "create_bot_unregistered"
                  | "deletion_fence"
                  | "unknown_boat"
                  | "unnamed_boat";
                botId: string | null;
                boxId: string | null;
                name: string | null;
                summary: string;
                facts: {
                  resolved?: boolean;
                  ageMs?: number;
                  windowLeftMs?: number;
                  /** @enum {string} */
                  fencePhase?: "prepared" | "accepted" | "blocked";
                  /** @enum {string} */
                  fenceStatus?: "pending" | "processing" | "blocked" | "completed";
                  inFlightLeftMs?: number;
                  stampedAheadMs?: number;
                  provider:
                    | {
                        /** @enum {string} */
                        kind: "present";
                        name: string | null;
                        state: string;
                      }
                    | {
                        /** @enum {string} */
                        kind: "absent";
                        status: number;
                      }
                    | {
                        /** @enum {string} */
                        kind: "unknown";
                        reason: string;
                      }
                    | {
                        /** @enum {string} */
                        kind: "not_checked";
                      };
                };
                action: {
                  name: ("adopt" | "reconcileDeletion" | "retryDeletion" | "retireCreate") | null;
                  command: string | null;
                  advice: string;
                };
                stateDigest: string;
              } | null;
              expectedState: string | null;
              command: string | null;
            };
          };
        };
        /** @description Default Response */
        "4XX": {
          headers: {
            [name: string]: unknown;
          };
          content: {
            "application/json": components["schemas"]["ErrorBody"];
          };
        };
        /** @description Default Response */
        "5XX": {
          headers: {
            [name: string]: unknown;
          };
          content: {
            "application/json": components["schemas"]["ErrorBody"];
          };
        };
      };
    };
    put?: never;
    /** Apply a Boat action against its previewed state (409 state_changed when it moved) */
    post: {
      parameters: {
        query?: never;
        header?: never;
        path: {
          action: "adopt" | "reconcileDeletion" | "retryDeletion" | "retireCreate";
        };
        cookie?: never;
      };
      requestBody: {
        content: {
          "application/json": {
            botId?: string;
            boxId?: string;
            expectedState: string;
          };
        };
      };
      responses: {
        /** @description Default Response */
        200: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            "application/json":
              | {
                  /** @enum {boolean} */
                  ok: true;
                  /** @enum {string} */
                  action: "adopt";
                  botId: string;
                  boxId: string;
                  name: string;
                  renamed: boolean;
                  alreadyAdopted: boolean;
                }
              | {
                  /** @enum {boolean} */
                  ok: true;
                  /** @enum {string} */
                  action: "retireCreate";
                  botId: string;
                  boxId: string;
                  proof: number;
                }
              | {
                  /** @enum {boolean} */
                  ok: true;
                  /** @enum {string} */
                  action: "reconcileDeletion";
                  boxId: string;
                  /** @enum {string} */
                  outcome: "confirmed" | "pending" | "blocked" | "not_running";
                  message: string;
                  next: {
                    name: ("adopt" | "reconcileDeletion" | "retryDeletion" | "retireCreate") | null;
                    command: string | null;
                    advice: string;
                  } | null;
                }
              | {
                  /** @enum {boolean} */
                  ok: true;
                  /** @enum {string} */
                  action: "retryDeletion";
                  boxId: string;
                  pending: boolean;
                };
          };
        };
        /** @description Default Response */
        "4XX": {
          headers: {
            [name: string]: unknown;
          };
          content: {
            "application/json": components["schemas"]["ErrorBody"];
          };
        };
        /** @description Default Response */
        "5XX": {
          headers: {
            [name: string]: unknown;
          };
          content: {
            "application/json": components["schemas"]["ErrorBody"];
          };
        };
      };
    };
    delete?: never;
    options?: never;
    head?: never;
    patch?: never;
    trace?: never;
  };
  "/v1/recovery/locks/gc": {
    parameters: {
      query?: never;
      header?: never;
      path?: never;
      cookie?: never;
    };
    /** Preview lock garbage collection: the leftovers and stopped-edit locks that would go */
    get: {
      parameters: {
        query?: never;
        header?: never;
        path?: never;
        cookie?: never;
      };
      requestBody?: never;
      responses: {
        /** @description Default Response */
        200: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            "application/json": {
              /** @enum {boolean} */
              ok: true;
              /** @enum {boolean} */
              preview: true;
              /** @enum {boolean} */
              changed: false;
              candidates: string[];
              command: string;
            };
          };
        };
        /** @description Default Response */
        "4XX": {
          headers: {
            [name: string]: unknown;
          };
          content: {
            "application/json": components["schemas"]["ErrorBody"];
          };
        };
        /** @description Default Response */
        "5XX": {
          headers: {
            [name: string]: unknown;
          };
          content: {
            "application/json": components["schemas"]["ErrorBody"];
          };
        };
      };
    };
    put?: never;
    /** Remove the lock garbage that is still garbage now (as `drydock locks gc --yes`) */
    post: {
      parameters: {
        query?: never;
        header?: never;
        path?: never;
        cookie?: never;
      };
      requestBody: {
        content: {
          "application/json": {
            /** @enum {boolean} */
            confirm: true;
          };
        };
      };
      responses: {
        /** @description Default Response */
        200: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            "application/json": {
              /** @enum {boolean} */
              ok: true;
              removed: string[];
              kept: string[];
            };
          };
        };
        /** @description Default Response */
        "4XX": {
          headers: {
            [name: string]: unknown;
          };
          content: {
            "application/json": components["schemas"]["ErrorBody"];
          };
        };
        /** @description Default Response */
        "5XX": {
          headers: {
            [name: string]: unknown;
          };
          content: {
            "application/json": components["schemas"]["ErrorBody"];
          };
        };
      };
    };
    delete?: never;
    options?: never;
    head?: never;
    patch?: never;
    trace?: never;
  };
  "/v1/recovery/restores/purge": {
    parameters: {
      query?: never;
      header?: never;
      path?: never;
      cookie?: never;
    };
    /** Preview purging archived restores finished olderThanDays ago: the list and its fence */
    get: {
      parameters: {
        query?: {
          olderThanDays?: number;
        };
        header?: never;
        path?: never;
        cookie?: never;
      };
      requestBody?: never;
      responses: {
        /** @description Default Response */
        200: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            "application/json": {
              /** @enum {boolean} */
              ok: true;
              /** @enum {boolean} */
              preview: true;
              /** @enum {boolean} */
              changed: false;
              candidates: {
                botId: string;
                operationId: string;
                phase: string;
                seq: number;
                headHash: string;
                finishedAt: string;
              }[];
              kept: {
                botId: string;
                operationId: string;
                problem: string;
              }[];
              stateDigest: string;
              command: string;
            };
          };
        };
        /** @description Default Response */
        "4XX": {
          headers: {
            [name: string]: unknown;
          };
          content: {
            "application/json": components["schemas"]["ErrorBody"];
          };
        };
        /** @description Default Response */
        "5XX": {
          headers: {
            [name: string]: unknown;
          };
          content: {
            "application/json": components["schemas"]["ErrorBody"];
          };
        };
      };
    };
    put?: never;
    /** Purge the previewed archived restores (409 state_changed when the list moved) */
    post: {
      parameters: {
        query?: never;
        header?: never;
        path?: never;
        cookie?: never;
      };
      requestBody: {
        content: {
          "application/json": {
            /** @default 30 */
            olderThanDays?: number;
            expectedState: string;
          };
        };
      };
      responses: {
        /** @description Default Response */
        200: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            "application/json": {
              /** @enum {boolean} */
              ok: true;
              purged: {
                botId: string;
                operationId: string;
                phase: string;
                seq: number;
                headHash: string;
                finishedAt: string;
              }[];
              kept: {
                botId: string;
                operationId: string;
                problem: string;
              }[];
            };
          };
        };
        /** @description Default Response */
        "4XX": {
          headers: {
            [name: string]: unknown;
          };
          content: {
            "application/json": components["schemas"]["ErrorBody"];
          };
        };
        /** @description Default Response */
        "5XX": {
          headers: {
            [name: string]: unknown;
          };
          content: {
            "application/json": components["schemas"]["ErrorBody"];
          };
        };
      };
    };
    delete?: never;
    options?: never;
    head?: never;
    patch?: never;
    trace?: never;
  };
  "/v1/locks": {
    parameters: {
      query?: never;
      header?: never;
      path?: never;
      cookie?: never;
    };
    /** The lock files: owners as digests, liveness, the restore or edit holding each, leftovers */
    get: {
      parameters: {
        query?: never;
        header?: never;
        path?: never;
        cookie?: never;
      };
      requestBody?: never;
      responses: {
        /** @description Default Response */
        200: {
          headers: {
            [name: string]: unknown;
          };
          content: {
            "application/json": {
              /** @enum {boolean} */
              ok: true;
              locks: {
                path: string;
                /** @enum {string} */
                kind: "workspace" | "workspace-registry" | "journal" | "saga-state" | "other";
                present: boolean;
                pid: number | null;
                createdAt: string | null;
                alive: boolean | null;
                ownerDigest: string | null;
                transactionId: string | null;
                purpose: ("checkpoint-restore" | "workspace-edit") | null;
                note: string | null;
                leftovers: number;
                kept: number;
                problem: string | null;
              }[];
            };
          };
        };
        /** @description Default Response */
        "4XX": {
          headers: {
            [name: string]: unknown;
          };
          content: {
            "application/json": components["schemas"]["ErrorBody"];
          };
        };
        /** @description Default Response */
        "5XX": {
          headers: {
            [name: string]: unknown;
          };
          content: {
            "application/json": components["schemas"]["ErrorBody"];
          };
        };
      };
    };
    put?: never;
    post?: never;
    delete?: never;
    options?: never;
    head?: never;
    patch?: never;
    trace?: never;
  };
}
export type webhooks = Record<string, never>;
export interface components {
  schemas: {
    /** @description Every error answer */
    ErrorBodyInput: {
      /** @constant */
      ok: false;
      error: {
        code: string;
        message: string;
        requestId: string;
        details?: unknown;
      } & {
        [key: string]: unknown;
      };
    };
    /** @description Every error answer */
    ErrorBody: {
      /** @constant */
      ok: false;
      error: {
        code: string;
        message: string;
        requestId: string;
        details?: unknown;
      } & {
        [key: string]: unknown;
      };
    };
  };
  responses: never;
  parameters: never;
  requestBodies: never;
  headers: never;
  pathItems: never;
}
export type $defs = Record<string, never>;
export type operations = Record<string, never>;
