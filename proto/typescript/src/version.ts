/** The package's version: the proxy's. */
export const version = "0.1.0";
