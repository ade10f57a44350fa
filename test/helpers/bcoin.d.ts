// The part of bcoin 1.0 (untyped JavaScript) the tests use.
declare module "bcoin" {
  namespace bcoin {
    class FullNode {
      constructor(options: Record<string, unknown>);
      open(): Promise<void>;
      close(): Promise<void>;
    }
    class Script {
      static fromRaw(raw: Buffer): Script;
      static fromAddress(address: Address): Script;
      toRaw(): Buffer;
    }
    class Address {
      static fromString(address: string, network?: string): Address;
    }
    class Coin {
      constructor(options: { version: number; height: number; value: number; script: Script; hash: string; index: number; coinbase: boolean });
      value: number;
    }
    class KeyRing {
      static generate(): KeyRing;
      getAddress(): Address;
      getAddress(enc: "string", network: string): string;
    }
    class TX {
      toRaw(): Buffer;
    }
    class MTX {
      addCoin(coin: Coin): void;
      addOutput(address: Address, value: number): void;
      sign(ring: KeyRing): number;
      toTX(): TX;
    }
  }
  export default bcoin;
}
