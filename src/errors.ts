/**
 * The one error catalogue. Every error the service sends is built from here, and
 * docs/errors.md lists exactly these codes (a test holds the two together).
 */
export const ERROR_CATALOGUE = {
  invalid_json: { status: 400, message: 'The request body is not valid JSON.' },
  invalid_request: { status: 400, message: 'The request is not valid.' },
  unauthorized: { status: 401, message: 'A valid API key is required.' },
  forbidden: { status: 403, message: 'You are not allowed to do this.' },
  not_found: { status: 404, message: 'Nothing was found at this address.' },
  stream_expired: { status: 410, message: 'The events asked for are no longer kept.' },
  method_not_allowed: { status: 405, message: 'This method is not allowed on this route.' },
  conflict: { status: 409, message: 'The resource already exists.' },
  payload_too_large: { status: 413, message: 'The request body is too large.' },
  unsupported_media_type: { status: 415, message: 'The request body must be application/json.' },
  unprocessable_document: { status: 422, message: 'The document could not be read.' },
  quota_exceeded: { status: 429, message: 'The quota for this plan is used up until the window resets.' },
  concurrency_limit: { status: 429, message: 'Too many requests of this caller are running at once.' },
  internal: { status: 500, message: 'Something went wrong on our side.' },
  upstream_error: { status: 502, message: 'The upstream service failed.' },
  unavailable: { status: 503, message: 'The service is unavailable right now.' },
  overloaded: { status: 503, message: 'This server is serving as many streams as it can.' },
  upstream_timeout: { status: 504, message: 'The upstream service did not answer in time.' },
} as const satisfies Record<string, { status: number; message: string }>;

export type ErrorCode = keyof typeof ERROR_CATALOGUE;

/** One failing field of a request, as listed in `details`. */
export interface ErrorDetail {
  path: string;
  message: string;
}

/** The wire shape of every error body. */
export interface ErrorBody {
  error: { code: ErrorCode; message: string; details?: ErrorDetail[] };
}

/** An error that knows its stable code and HTTP status; safe to send to a client as is. */
export class ApiError extends Error {
  readonly code: ErrorCode;
  readonly status: number;
  readonly details: ErrorDetail[] | undefined;
  /** Extra response headers that belong to this error (Allow, Retry-After, WWW-Authenticate). */
  readonly headers: Record<string, string>;

  constructor(code: ErrorCode, message?: string, options: { details?: ErrorDetail[]; headers?: Record<string, string> } = {}) {
    super(message ?? ERROR_CATALOGUE[code].message);
    this.name = 'ApiError';
    this.code = code;
    this.status = ERROR_CATALOGUE[code].status;
    this.details = options.details;
    this.headers = options.headers ?? {};
  }

  /** The JSON body sent for this error. */
  toBody(): ErrorBody {
    const body: ErrorBody = { error: { code: this.code, message: this.message } };
    if (this.details && this.details.length > 0) body.error.details = this.details;
    return body;
  }
}

/**
 * The abort reason when a client disconnects: every layer that sees its request's signal fire with
 * this knows the work was cancelled on purpose, not failed.
 */
export class ClientGone extends Error {
  constructor() {
    super('The client disconnected.');
    this.name = 'ClientGone';
  }
}

/**
 * The abort reason when the server ends work at the end of its shutdown grace period: unlike a
 * client that left, the client is still there and is told, with one `unavailable` error.
 */
export class ServerShutdown extends ApiError {
  constructor() {
    super('unavailable', 'The server is shutting down; retry the request.', { headers: { 'Retry-After': '5' } });
  }
}

/** Turns anything thrown into an ApiError; unknown errors become `internal` with no internals exposed. */
export function toApiError(error: unknown): ApiError {
  if (error instanceof ApiError) return error;
  return new ApiError('internal');
}

/** The reason phrase for a status line, e.g. `404 Not Found`. */
export const STATUS_TEXT: Record<number, string> = {
  200: '200 OK',
  201: '201 Created',
  204: '204 No Content',
  304: '304 Not Modified',
  400: '400 Bad Request',
  401: '401 Unauthorized',
  403: '403 Forbidden',
  404: '404 Not Found',
  405: '405 Method Not Allowed',
  409: '409 Conflict',
  410: '410 Gone',
  413: '413 Payload Too Large',
  415: '415 Unsupported Media Type',
  429: '429 Too Many Requests',
  500: '500 Internal Server Error',
  502: '502 Bad Gateway',
  503: '503 Service Unavailable',
  504: '504 Gateway Timeout',
};
