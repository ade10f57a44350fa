// SPDX-License-Identifier: MIT
// The local dev chain's stand-in for a stablecoin (6 decimals, like USDC and USDT): placed with
// anvil_setCode at the asset table's Test contract addresses. Anyone may mint: it is a test token.
pragma solidity ^0.8.20;

contract TestToken {
    event Transfer(address indexed from, address indexed to, uint256 value);

    mapping(address => uint256) public balanceOf;
    uint256 public totalSupply;

    function decimals() external pure returns (uint8) {
        return 6;
    }

    function mint(address to, uint256 value) external {
        totalSupply += value;
        balanceOf[to] += value;
        emit Transfer(address(0), to, value);
    }

    function transfer(address to, uint256 value) external returns (bool) {
        require(balanceOf[msg.sender] >= value, "balance too low");
        balanceOf[msg.sender] -= value;
        balanceOf[to] += value;
        emit Transfer(msg.sender, to, value);
        return true;
    }

    /// Two payments in one transaction (two Transfer logs): what a batch payout or a router does.
    function transferBoth(address a, uint256 va, address b, uint256 vb) external returns (bool) {
        require(balanceOf[msg.sender] >= va + vb, "balance too low");
        balanceOf[msg.sender] -= va + vb;
        balanceOf[a] += va;
        balanceOf[b] += vb;
        emit Transfer(msg.sender, a, va);
        emit Transfer(msg.sender, b, vb);
        return true;
    }
}
