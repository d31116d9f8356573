/**
 * `@reckon/client`: Reckon's HTTP API, the connector wire protocol and the tool-call wrapper.
 * @packageDocumentation
 */
export * from "./errors.js";
export * from "./types.js";
export { routes, type Route, type Method, type OperationId } from "./routes.js";
export { parseRetryAfter, type OutgoingRequest, type RequestOptions, type TransportOptions } from "./transport.js";
export { EventStream, type EventStreamOptions } from "./events.js";
export { sign, verify } from "./signature.js";
export {
  ReckonClient, WaitTimeoutError, isSettled, isAwaitingConfirmation, SETTLED_STATES,
  type ReckonClientOptions, type WaitOptions, type SignedCallback,
} from "./client.js";
export * from "./upstream.js";
export * from "./tool.js";
