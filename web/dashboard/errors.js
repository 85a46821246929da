// The API error a failed call throws, with its HTTP status and the contract code.

/** An API error as the contract sends it, kept with its HTTP status. */
export class ApiFailure extends Error {
  constructor(status, code, message, details) {
    super(message);
    this.status = status;
    this.code = code;
    this.details = details;
  }
}
