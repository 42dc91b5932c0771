// @mcp-sealer/client: seal and open MCP requestStates with the sealer over
// gRPC or REST, the request digest computed in process as the sealer's core
// computes it, typed errors carrying the sealer's reason. The codec for the
// official MCP TypeScript SDK is in "@mcp-sealer/client/mcp".
export { grpcClient, fromConnect } from "./grpc.js";
export { restClient, fromRest } from "./rest.js";
export { toolCall, promptGet, resourceRead, defaultTimeoutMs, flowAfter, inputKeys } from "./client.js";
export type { Binding, CallOptions, ClientOptions, Flow, FlowRequest, OpenRequest, Opened, Outcome, Recorded, RecordRequest, SealRequest, Sealed, SealerClient } from "./client.js";
export { requestDigest, checkParamName, salientParams, MAX_DEPTH, MAX_VALUES } from "./digest.js";
export { answersDigest, answersDigestOfJson } from "./answers.js";
export type { JsonObject, JsonValue } from "./digest.js";
export { SealerError, Reason, rejected, parseReason } from "./errors.js";
